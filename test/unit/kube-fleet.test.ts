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
    // one list (the first pass; node-a took a free slot, so its release looks
    // for no waiter elsewhere) and no clock advance: the watch woke it
    expect(server.calls.filter((c) => c.verb === 'list' && c.resource === 'leases').length).toBe(
      listsBefore + 1,
    );

    // node-w dies holding the slot (its watch ends with it); a new waiter takes it only once the lease expires
    h.unfollow?.();
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
    h.unfollow?.();
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
    // watching and queued (a join cut off by the outage would end the wait KUBE_UNAVAILABLE)
    await waitFor(
      () =>
        watchesOn(prefix) > w0 && queueOf(server.get('leases', NS, `${prefix}0`) as never).includes('node-w'),
      5000,
    );
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
    h.unfollow?.();
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
    h.unfollow?.();
  });

  const conflicts = (name: string) =>
    server.calls.filter((c) => c.resource === 'leases' && c.name === name && c.status === 409).length;
  /** Writes `node` as the slot's holder (renewed now, its label set), as a holder handing it over would. */
  const handTo = (name: string, node: string, clock: FakeClock): void => {
    const l = server.get('leases', NS, name)!;
    server.put('leases', NS, {
      ...l,
      metadata: {
        ...l.metadata,
        labels: { ...(l.metadata.labels as object), [`${CONCERNS_PREFIX}${node}`]: 'true' },
      },
      spec: { ...(l.spec as object), holderIdentity: node, renewTime: new Date(clock.now()).toISOString() },
    });
  };
  /** The FleetSlots of one node, on slots `<prefix>0..n-1` (lease 30 s). */
  const slotsOn =
    (clock: FakeClock, prefix: string, n: number, random?: () => number) =>
    (holder: string): FleetSlots =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log, ...(random ? { random } : {}) },
        { slots: n, leaseDurationSeconds: 30, prefix },
      );
  /** A node waiting from a pass that sees every slot busy, queued on slot floor(pick x N). */
  const waiter = (clock: FakeClock, mk: (n: string) => FleetSlots, node: string, pick: number) =>
    acquireSlot(mk(node), { clock, log, random: () => pick, retryMs: 600_000, wakeSpreadMs: 100 });

  it('a holder keeps watching its slot: a node that queued meanwhile gets it with no 409', async () => {
    const clock = new FakeClock();
    const prefix = 'keep-slot-';
    const mk = slotsOn(clock, prefix, 1);
    const a = mk('node-a');
    const held = (await a.acquire())!;
    const w = waiter(clock, mk, 'node-w', 0);
    await waitFor(() => queueOf(lease(`${prefix}0`) as never).includes('node-w'), 5000);
    await a.release(held);
    const hw = await w;
    // node-v queues while node-w holds: node-w's copy follows the watch
    const v = waiter(clock, mk, 'node-v', 0);
    await waitFor(() => queueOf(hw.lease as never).includes('node-v'), 5000);
    const before = conflicts(`${prefix}0`);
    await mk('node-w').release(hw);
    const hv = await v;
    expect(hv.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-v');
    expect(conflicts(`${prefix}0`)).toBe(before);
    hv.unfollow?.();
  });

  it('a holder with nobody queued hands its slot to a node at the back of a longer queue', async () => {
    const clock = new FakeClock();
    const prefix = 'steal-slot-';
    // random 0: node-a's release picks the last of the queue it steals from
    const mk = slotsOn(clock, prefix, 2, () => 0);
    const a = mk('node-a');
    const b = mk('node-b');
    const ha = (await a.tryTake(`${prefix}0`, undefined))!;
    const hb = (await b.tryTake(`${prefix}1`, undefined))!;
    // three nodes queue on slot 1 (random 0.99 picks it), in order of name (same clock)
    const waits = ['node-w1', 'node-w2', 'node-w3'].map((n) => waiter(clock, mk, n, 0.99));
    await waitFor(() => queueOf(lease(`${prefix}1`) as never).length === 3, 5000);
    const writes0 = writes(`${prefix}0`);
    ha.waited = true; // as if node-a had waited for it: the slots are contended
    await a.release(ha);
    const h3 = await waits[2]!;
    expect(h3.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w3');
    expect(writes(`${prefix}0`)).toBe(writes0 + 1); // the hand-over only: node-w3 did not write it
    // node-w3 leaves the queue it was in; the others keep their order
    await waitFor(() => queueOf(lease(`${prefix}1`) as never).length === 2, 5000);
    expect(queueOf(lease(`${prefix}1`) as never)).toEqual(['node-w1', 'node-w2']);

    // node-w3 finishes with nobody queued on slot 0; slot 1's queue [w1, w2] is
    // too short to take from (its first two may get slot 1 any moment): slot 0 is cleared
    await mk('node-w3').release(h3);
    expect(holderOf(`${prefix}0`)).toBeUndefined();
    expect(queueOf(lease(`${prefix}1`) as never)).toEqual(['node-w1', 'node-w2']);
    await b.release(hb);
    const h1 = await waits[0]!;
    expect(h1.name).toBe(`${prefix}1`);
    await mk('node-w1').release(h1);
    const h2 = await waits[1]!;
    expect(h2.name).toBe(`${prefix}1`);
    h2.unfollow?.();
  });

  it('a node handed a second slot while it holds one hands the second on at once', async () => {
    const clock = new FakeClock();
    const prefix = 'twice-slot-';
    const mk = slotsOn(clock, prefix, 2);
    const a = mk('node-a');
    const b = mk('node-b');
    const ha = (await a.tryTake(`${prefix}0`, undefined))!;
    const hb = (await b.tryTake(`${prefix}1`, undefined))!;
    const w = waiter(clock, mk, 'node-w', 0); // queued on slot 0
    await waitFor(() => queueOf(lease(`${prefix}0`) as never).includes('node-w'), 5000);
    const x = waiter(clock, mk, 'node-x', 0.99); // queued on slot 1
    await waitFor(() => queueOf(lease(`${prefix}1`) as never).includes('node-x'), 5000);
    await a.release(ha);
    const hw = await w;
    expect(hw.name).toBe(`${prefix}0`);
    // slot 1 handed to node-w too (as a second holder stealing it would): node-w hands it on to node-x
    handTo(`${prefix}1`, 'node-w', clock);
    const hx = await x;
    expect(hx.name).toBe(`${prefix}1`);
    expect(holderOf(`${prefix}1`)).toBe('node-x');
    expect(holderOf(`${prefix}0`)).toBe('node-w');
    expect(hb.state).toBe('held'); // node-b's handle: it lost the slot, as a dead holder would
    hw.unfollow?.();
    hx.unfollow?.();
  });

  it('a wait that ends while its join is in flight leaves the queue once the join has landed', async () => {
    const clock = new FakeClock();
    const prefix = 'inflight-slot-';
    const mk = slotsOn(clock, prefix, 2);
    await mk('node-a').tryTake(`${prefix}0`, undefined);
    await mk('node-b').tryTake(`${prefix}1`, undefined);
    const joins = () =>
      server.calls.filter((c) => c.verb === 'patch' && c.name === `${prefix}0` && c.status === 200).length;
    server.patchLatencyMs = 400;
    try {
      const w = waiter(clock, mk, 'node-w', 0); // joins slot 0: the patch takes 400 ms
      await waitFor(() => server.patchesHeld > 0, 5000); // the join has reached the server
      // slot 1 handed to node-w (as a holder taking a waiter from another queue) while its join is in flight
      handTo(`${prefix}1`, 'node-w', clock);
      const hw = await w;
      expect(hw.name).toBe(`${prefix}1`);
      // the join landed, then the leave: node-w is in no queue of slot 0
      await waitFor(() => joins() >= 2 && !queueOf(lease(`${prefix}0`) as never).includes('node-w'), 5000);
      expect(queueOf(lease(`${prefix}0`) as never)).toEqual([]);
      hw.unfollow?.();
    } finally {
      server.patchLatencyMs = 0;
    }
  });

  it('a second slot handed to a holder, with nobody queued on it, goes to a waiter of a longer queue', async () => {
    const clock = new FakeClock();
    const prefix = 'onward-slot-';
    const mk = slotsOn(clock, prefix, 3, () => 0);
    const ha = (await mk('node-a').tryTake(`${prefix}0`, undefined))!;
    const hb = (await mk('node-b').tryTake(`${prefix}1`, undefined))!;
    await mk('node-c').tryTake(`${prefix}2`, undefined);
    const w = waiter(clock, mk, 'node-w', 0); // queued on slot 0
    await waitFor(() => queueOf(lease(`${prefix}0`) as never).includes('node-w'), 5000);
    const waits = ['node-x1', 'node-x2', 'node-x3'].map((n) => waiter(clock, mk, n, 0.99)); // on slot 2
    await waitFor(() => queueOf(lease(`${prefix}2`) as never).length === 3, 5000);
    await mk('node-a').release(ha);
    const hw = await w;
    // node-b hands slot 1 to node-w too: node-w hands it on to the back of slot 2's queue
    handTo(`${prefix}1`, 'node-w', clock);
    const hx3 = await waits[2]!;
    expect(hx3.name).toBe(`${prefix}1`);
    expect(holderOf(`${prefix}1`)).toBe('node-x3');
    expect(hb.state).toBe('held');
    hw.unfollow?.();
    hx3.unfollow?.();
  });
});
