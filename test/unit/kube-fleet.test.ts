import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { KubeClient } from '../../agent/kube/client.js';
import {
  CONCERNS_PREFIX,
  FleetSlots,
  HOLDER_LABEL,
  SLOT_LABEL,
  queueOf,
} from '../../agent/kube/fleet-slots.js';
import { acquireSlot, runFleetUpgrade } from '../../agent/kube/fleet-upgrade.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
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

describe('fleet upgrade slots over Leases (real client-node, in-test API server)', () => {
  const server = new FakeKubeServer();
  let api: () => KubeClient;

  beforeAll(async () => {
    await server.start();
    // Generous call deadlines and leases: 50 agents and the server share one
    // process on a loaded machine; holders release explicitly, so a long lease
    // changes nothing but what a stalled renewal costs.
    api = () => new KubeClient(server.kubeConfig(NS).kc, { callTimeoutMs: 15_000 });
  });
  afterAll(() => server.stop());

  it('50 agents with N = 2: never more than 2 upgrade at once, all end at the new generation', async () => {
    const prefix = 'fleet50-slot-';
    let inFlight = 0;
    let maxInFlight = 0;
    const generation = new Map<string, number>();
    const agents = Array.from({ length: 50 }, (_, i) => `compute-${String(i).padStart(2, '0')}`);
    for (const n of agents) generation.set(n, 1);

    await Promise.all(
      agents.map(async (node) => {
        const slots = new FleetSlots(
          { api: api(), namespace: NS, holder: node, clock: systemClock, log },
          { slots: 2, leaseDurationSeconds: 30, renewIntervalMs: 300, prefix },
        );
        await runFleetUpgrade(
          slots,
          async () => {
            inFlight++;
            maxInFlight = Math.max(maxInFlight, inFlight);
            await sleep(15 + Math.floor(Math.random() * 15));
            generation.set(node, 2);
            inFlight--;
          },
          { clock: systemClock, log, retryMs: 60, wakeSpreadMs: 30, startJitterMs: 50 },
        );
      }),
    );

    expect(maxInFlight).toBeLessThanOrEqual(2);
    expect(maxInFlight).toBe(2);
    expect([...generation.values()].every((g) => g === 2)).toBe(true);
    const leases = server.list('leases', NS).filter((l) => String(l.metadata.name).startsWith(prefix));
    expect(leases.map((l) => l.metadata.name).sort()).toEqual([`${prefix}0`, `${prefix}1`]);
    // every slot was released at the end
    for (const l of leases) expect((l.spec as { holderIdentity?: string }).holderIdentity).toBeUndefined();
    // the race was real: some creates or updates lost with 409
    const conflicts = server.calls.filter((c) => c.resource === 'leases' && c.status === 409);
    expect(conflicts.length).toBeGreaterThan(0);
    // waiters watched the slots instead of polling
    expect(server.calls.filter((c) => c.resource === 'leases' && c.verb === 'watch').length).toBeGreaterThan(
      0,
    );
  }, 60_000);

  it('a holder that dies (stops renewing, never releases) frees its slot only after expiry', async () => {
    const clock = new FakeClock();
    const prefix = 'dead-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log },
        { slots: 1, leaseDurationSeconds: 30, prefix },
      );
    const dead = await mk('node-dead').acquire();
    expect(dead?.name).toBe(`${prefix}0`);
    const other = mk('node-alive');
    expect(await other.acquire()).toBeUndefined();
    clock.advance(29_999);
    expect(await other.acquire()).toBeUndefined();
    clock.advance(2);
    const h = await other.acquire();
    expect(h?.name).toBe(`${prefix}0`);
    const lease = server.get('leases', NS, `${prefix}0`)!;
    expect(lease.spec).toMatchObject({ holderIdentity: 'node-alive', leaseTransitions: 1 });
    expect(lease.metadata.labels).toMatchObject({ [SLOT_LABEL]: 'true' });
    // the dead node, were it to come back, cannot renew a slot it lost
    await mk('node-dead').renew(dead!);
    expect(dead!.state).toBe('lost');
  });

  it('renewal keeps the slot while a long local upgrade runs', async () => {
    const prefix = 'renew-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock: systemClock, log },
        { slots: 1, leaseDurationSeconds: 1, renewIntervalMs: 250, prefix },
      );
    let aDone = false;
    let bTookDuringA = false;
    const a = runFleetUpgrade(
      mk('node-a'),
      async () => {
        await sleep(2500); // 2.5 lease durations
        aDone = true;
      },
      { clock: systemClock, log, retryMs: 50 },
    );
    await waitFor(() => server.get('leases', NS, `${prefix}0`) !== undefined, 5000);
    const b = mk('node-b');
    while (!aDone) {
      const h = await b.acquire();
      if (h && !aDone) bTookDuringA = true;
      if (h) break;
      await sleep(100);
    }
    await a;
    expect(bTookDuringA).toBe(false);
  }, 15_000);

  it('releases the slot when the local upgrade fails, and passes the failure on', async () => {
    const prefix = 'fail-slot-';
    const slots = new FleetSlots(
      { api: api(), namespace: NS, holder: 'node-f', clock: systemClock, log },
      { slots: 1, leaseDurationSeconds: 60, prefix },
    );
    await expect(
      runFleetUpgrade(
        slots,
        async () => {
          throw new Error('health gate failed');
        },
        { clock: systemClock, log },
      ),
    ).rejects.toThrow('health gate failed');
    const lease = server.get('leases', NS, `${prefix}0`)!;
    expect((lease.spec as { holderIdentity?: string }).holderIdentity).toBeUndefined();
    const view = await slots.snapshot();
    expect(view.find((v) => v.name === `${prefix}0`)?.holder).toBeNull();
  });

  it('with the API server unreachable no upgrade starts (KUBE_UNAVAILABLE)', async () => {
    const slots = new FleetSlots(
      { api: api(), namespace: NS, holder: 'node-u', clock: systemClock, log },
      { slots: 2, leaseDurationSeconds: 10, prefix: 'down-slot-' },
    );
    let started = false;
    server.unavailable = true;
    try {
      const err = await runFleetUpgrade(
        slots,
        async () => {
          started = true;
        },
        { clock: systemClock, log, retryMs: 10 },
      ).catch((e: unknown) => e);
      expect(isSpcdError(err, 'KUBE_UNAVAILABLE')).toBe(true);
    } finally {
      server.unavailable = false;
    }
    expect(started).toBe(false);
  });

  // A waiter watches, by label selector, the slots that concern it (not one slot by name).
  const watchesOn = (_prefix: string): number => server.openWatches('leases', NS);
  const holderOf = (name: string): string | undefined =>
    (server.get('leases', NS, name)?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;

  it('a waiter watches: takes a released slot at once, and a dead holder’s slot at expiry (fake clock, no polling)', async () => {
    const clock = new FakeClock();
    const prefix = 'watch-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log },
        { slots: 1, leaseDurationSeconds: 30, prefix },
      );
    const a = mk('node-a');
    const held = await a.acquire();
    expect(held).toBeDefined();
    const before = 0;
    const listsBefore = server.calls.filter((c) => c.verb === 'list' && c.resource === 'leases').length;
    let got = acquireSlot(mk('node-w'), { clock, log, random: () => 0, retryMs: 600_000, wakeSpreadMs: 100 });
    await waitFor(() => watchesOn(prefix) > before, 5000);
    expect(watchesOn(prefix)).toBe(1);
    await a.release(held!);
    let h = await got;
    expect(h.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w');
    // one list (the first pass) and no clock advance: the watch woke it
    expect(server.calls.filter((c) => c.verb === 'list' && c.resource === 'leases').length).toBe(
      listsBefore + 1,
    );

    // node-w dies holding the slot; a new waiter takes it only once the lease expires
    const before2 = 0;
    let taken = false;
    got = acquireSlot(mk('node-x'), { clock, log, random: () => 0, retryMs: 600_000, wakeSpreadMs: 100 });
    void got.then(() => (taken = true));
    await waitFor(() => watchesOn(prefix) > before2, 5000);
    clock.advance(29_990);
    await sleep(100);
    expect(taken).toBe(false);
    expect(holderOf(`${prefix}0`)).toBe('node-w');
    clock.advance(20);
    h = await got;
    expect(holderOf(`${prefix}0`)).toBe('node-x');
    expect(h.lease.spec?.leaseTransitions).toBe(2);
  });

  it('a lost watch falls back to a slow poll, then watches again', async () => {
    const clock = new FakeClock();
    const prefix = 'lost-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log },
        { slots: 1, leaseDurationSeconds: 600, prefix },
      );
    const a = mk('node-a');
    const held = (await a.acquire())!;
    const w0 = 0;
    let taken = false;
    const got = acquireSlot(mk('node-w'), {
      clock,
      log,
      random: () => 0,
      retryMs: 10_000,
      wakeSpreadMs: 100,
    });
    void got.then(() => (taken = true));
    await waitFor(() => watchesOn(prefix) > w0, 5000);
    // the API server goes away: the stream ends and the re-watch cannot connect
    server.unavailable = true;
    server.closeWatches();
    await sleep(300);
    server.unavailable = false;
    // it is not watching now: it waits for its slow poll
    await sleep(200);
    expect(watchesOn(prefix)).toBe(0);
    const lists = () => server.calls.filter((c) => c.verb === 'list' && c.resource === 'leases').length;
    const l0 = lists();
    // the slow poll (retryMs x 0.5 with random 0): a pass, slot still held, so it watches again
    clock.advance(5_000);
    await waitFor(() => lists() > l0 && watchesOn(prefix) === 1, 5000);
    expect(taken).toBe(false);
    await a.release(held);
    const h = await got;
    expect(h.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w');
  });

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
    expect(lease(`${prefix}0`)?.metadata.labels?.[`${CONCERNS_PREFIX}node-w`]).toBe('true');
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
