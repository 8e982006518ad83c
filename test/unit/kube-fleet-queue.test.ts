import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../agent/kube/client.js';
import { FleetSlots, HOLDER_LABEL, NEXT_LABEL, queueOf } from '../../agent/kube/fleet-slots.js';
import { acquireSlot } from '../../agent/kube/fleet-upgrade.js';
import { silentLogger } from '../../agent/log.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeKubeServer } from '../support/kube-server.js';

const NS = 'spcd-system';
const log = silentLogger();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function waitFor(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}

describe('fleet slot queue: hand-over, expiry take-over (real client-node, in-test API server, fake clock)', () => {
  const server = new FakeKubeServer();
  let api: () => KubeClient;
  beforeAll(async () => {
    await server.start();
    api = () => new KubeClient(server.kubeConfig(NS).kc, { callTimeoutMs: 15_000 });
  });
  afterAll(() => server.stop());

  type LeaseObj = { spec?: { holderIdentity?: string }; metadata: { labels?: Record<string, string> } };
  const lease = (name: string) => server.get('leases', NS, name) as LeaseObj | undefined;
  const writes = (name: string) =>
    server.calls.filter(
      (c) => c.resource === 'leases' && c.name === name && c.verb === 'update' && c.status === 200,
    ).length;

  it('a release hands the slot to the head of the queue at once: one write, no take, no clock advance', async () => {
    const clock = new FakeClock();
    const prefix = 'hand-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log },
        { slots: 1, leaseDurationSeconds: 30, prefix },
      );
    const a = mk('node-a');
    const held = (await a.acquire())!;
    const waiting = acquireSlot(mk('node-w'), {
      clock,
      log,
      random: () => 0,
      retryMs: 600_000,
      wakeSpreadMs: 100,
    });
    await waitFor(() => queueOf(lease(`${prefix}0`) as never).includes('node-w'), 5000);
    expect(lease(`${prefix}0`)?.metadata.labels?.[NEXT_LABEL]).toBe('node-w');
    const before = writes(`${prefix}0`);
    await a.release(held);
    const h = await waiting;
    expect(h.name).toBe(`${prefix}0`);
    expect(lease(`${prefix}0`)?.spec?.holderIdentity).toBe('node-w');
    expect(lease(`${prefix}0`)?.metadata.labels?.[HOLDER_LABEL]).toBe('node-w');
    expect(queueOf(lease(`${prefix}0`) as never)).toEqual([]);
    // the release was the only write: the waiter did not write to take it
    expect(writes(`${prefix}0`)).toBe(before + 1);
  });
});
