import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { EtcdSlots } from '../../agent/etcd/slots.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * EtcdSlots against a real 3-member etcd cluster, one waiter at a time: what
 * a waiter does when the etcd client fails it between two of its calls.
 */
let cluster: EtcdCluster;
beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
}, 90_000);
afterAll(async () => {
  await cluster?.stop();
});

function slots(client: Etcd3, holder: string): EtcdSlots {
  return new EtcdSlots({
    client,
    prefix: `/slots-${process.pid}/`,
    holder,
    ttlSeconds: 30,
    clock: systemClock,
    log: silentLogger(),
  });
}

describe('EtcdSlots', () => {
  it('a waiter whose watch cannot be made stops waiting with ETCD_UNAVAILABLE and leaves the queue', async () => {
    const real = connectEtcd({ endpoints: cluster.endpoints() });
    onTestFinished(() => real.close());
    const first = slots(real, 'first');
    let release!: () => void;
    const held = first.withSlot(
      1,
      new AbortController().signal,
      () => new Promise<void>((r) => (release = r)),
    );
    await waitFor('the first node holds the only slot', async () => (await first.queue()).length === 1);
    // the same client, but a watch cannot be made (the client is at the room's boundary)
    const broken = new Proxy(real, {
      get(target, key) {
        if (key === 'watch')
          return () => {
            throw new Error('watch refused');
          };
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const second = slots(broken, 'second');
    let ran = false;
    const waited = second.withSlot(1, new AbortController().signal, async () => {
      ran = true;
    });
    await expect(waited).rejects.toMatchObject({ code: 'ETCD_UNAVAILABLE' });
    expect(ran).toBe(false);
    // its queue key went with it: only the holder is left
    expect((await first.queue()).map((e) => e.node)).toEqual(['first']);
    release();
    await held;
    await waitFor('the queue empty', async () => (await first.queue()).length === 0);
    await Promise.all([first.close(), second.close()]);
  }, 60_000);
});
