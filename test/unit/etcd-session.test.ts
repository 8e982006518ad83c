import { EventEmitter } from 'node:events';
import type { Etcd3, Lease } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { EtcdSession } from '../../agent/etcd/session.js';
import { silentLogger } from '../../agent/log.js';

/**
 * The node's one etcd lease (session.ts) over a fake etcd client: only
 * `lease()` is used, and each fake lease's grant is settled by the test.
 */
class FakeLease extends EventEmitter {
  released = false;
  revoked = false;
  settle!: { ok(id: string): void; fail(err: Error): void };
  private readonly granted = new Promise<string>((ok, fail) => (this.settle = { ok, fail }));
  grant(): Promise<string> {
    return this.granted;
  }
  release(): void {
    this.released = true;
  }
  async revoke(): Promise<void> {
    this.revoked = true;
  }
}

function session(): { s: EtcdSession; leases: FakeLease[] } {
  const leases: FakeLease[] = [];
  const client = {
    lease: () => {
      const l = new FakeLease();
      leases.push(l);
      return l as unknown as Lease;
    },
  } as unknown as Etcd3;
  return { s: new EtcdSession({ client, ttlSeconds: 60, log: silentLogger() }), leases };
}

describe('EtcdSession', () => {
  it('abandoning a lost lease while its successor is being granted leaves the successor alone, even when its grant fails', async () => {
    const { s, leases } = session();
    const first = s.lease();
    leases[0]!.settle.ok('1');
    const one = await first;
    leases[0]!.emit('lost', new Error('lapsed'));
    const second = s.lease(); // a new grant, still pending
    expect(leases).toHaveLength(2);
    s.abandon(one);
    leases[1]!.settle.fail(new Error('no leader'));
    await expect(second).rejects.toMatchObject({ code: 'ETCD_UNAVAILABLE' });
    expect(leases[1]!.released).toBe(true); // the failed grant stops its keep-alive
    const third = s.lease();
    leases[2]!.settle.ok('3');
    expect((await third).id).toBe('3');
  });

  it('abandoning the live lease stops its renewals and the next take grants another; close revokes the live one', async () => {
    const { s, leases } = session();
    const first = s.lease();
    leases[0]!.settle.ok('1');
    s.abandon(await first);
    expect(leases[0]!.released).toBe(true);
    expect(leases[0]!.revoked).toBe(false);
    const next = s.lease();
    leases[1]!.settle.ok('2');
    expect((await next).id).toBe('2');
    await s.close();
    expect(leases[1]!.revoked).toBe(true);
    await expect(s.lease()).rejects.toMatchObject({ code: 'ETCD_UNAVAILABLE' });
  });
});
