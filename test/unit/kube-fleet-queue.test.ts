import { describe, expect, it } from 'vitest';
import { CONCERNS_PREFIX, HOLDER_LABEL, queueOf } from '../../agent/kube/fleet-slots.js';
import { acquireSlot } from '../../agent/kube/fleet-upgrade.js';
import { FakeClock } from '../support/fake-clock.js';
import { settle } from '../support/fake-reconciler.js';
import { NS, fleetSlotStand, log } from '../support/kube-fleet.js';
import { waitFor } from '../support/wait.js';

/** Waiters watch the slots and queue on them; a release hands a slot to the head of a queue. */
describe('fleet slot queues over Leases (real client-node, in-test API server, fake clock)', () => {
  const { server, watches, holderOf, lease, lists, writes, conflicts, handTo, slotsOn, waiter } =
    fleetSlotStand();

  /** Slot `<prefix>0`, the only one, held by node-a; node-w waits for it, queued. */
  const heldWithWaiter = async (prefix: string) => {
    const clock = new FakeClock();
    const mk = slotsOn(clock, prefix, 1);
    const a = mk('node-a');
    const held = (await a.acquire())!;
    const w = waiter(clock, mk, 'node-w', 0);
    await waitFor('node-w queued', () => queueOf(lease(`${prefix}0`) as never).includes('node-w'));
    return { clock, mk, a, held, w };
  };

  it('a waiter watches: takes a released slot at once, and a dead holder’s slot at expiry (fake clock, no polling)', async () => {
    const clock = new FakeClock();
    const prefix = 'watch-slot-';
    const mk = slotsOn(clock, prefix, 1);
    const a = mk('node-a');
    const held = await a.acquire();
    expect(held).toBeDefined();
    const listsBefore = lists();
    let got = waiter(clock, mk, 'node-w', 0);
    await waitFor('node-w watching', () => watches() > 0);
    expect(watches()).toBe(1);
    await a.release(held!);
    let h = await got;
    expect(h.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w');
    // one list (the first pass; node-a took a free slot, so its release looks
    // for no waiter elsewhere) and no clock advance: the watch woke it
    expect(lists()).toBe(listsBefore + 1);

    // node-w dies holding the slot (its watch ends with it); a new waiter takes it only once the lease expires
    h.unfollow?.();
    let taken = false;
    got = waiter(clock, mk, 'node-x', 0);
    void got.then(() => (taken = true));
    // queued (so it has seen the slot): expiry counts from when node-x saw the holder's record
    await waitFor('node-x queued', () => queueOf(lease(`${prefix}0`) as never).includes('node-x'));
    // just short of expiry no timer is due: node-x has nothing to do, and does nothing
    const fired = clock.fired;
    clock.advance(29_990);
    expect(clock.fired).toBe(fired);
    await settle();
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
    const mk = slotsOn(clock, prefix, 1, undefined, 600);
    const a = mk('node-a');
    const held = (await a.acquire())!;
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
      'node-w watching and queued',
      () => watches() > 0 && queueOf(server.get('leases', NS, `${prefix}0`) as never).includes('node-w'),
    );
    // the API server goes away: the stream ends and the re-watch cannot connect
    const refused = server.refused;
    server.unavailable = true;
    server.closeWatches();
    await waitFor('the re-watch refused', () => server.refused > refused);
    server.unavailable = false;
    // it is not watching now: it waits for its slow poll, a timer on the clock that has not moved
    await settle();
    expect(watches()).toBe(0);
    const l0 = lists();
    // the slow poll (retryMs x 0.5 with random 0): a pass, slot still held, so it watches again
    clock.advance(5_000);
    await waitFor('node-w watching again after a pass', () => lists() > l0 && watches() === 1);
    expect(taken).toBe(false);
    await a.release(held);
    const h = await got;
    expect(h.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w');
    h.unfollow?.();
  });

  it('a release hands the slot to the head of the queue at once: one write, no take, no clock advance', async () => {
    const prefix = 'hand-slot-';
    const { a, held, w: waiting } = await heldWithWaiter(prefix);
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

  it('a holder keeps watching its slot: a node that queued meanwhile gets it with no 409', async () => {
    const prefix = 'keep-slot-';
    const { clock, mk, a, held, w } = await heldWithWaiter(prefix);
    await a.release(held);
    const hw = await w;
    // node-v queues while node-w holds: node-w's copy follows the watch
    const v = waiter(clock, mk, 'node-v', 0);
    await waitFor('node-v queued', () => queueOf(hw.lease as never).includes('node-v'));
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
    await waitFor('three nodes queued on slot 1', () => queueOf(lease(`${prefix}1`) as never).length === 3);
    const writes0 = writes(`${prefix}0`);
    ha.waited = true; // as if node-a had waited for it: the slots are contended
    await a.release(ha);
    const h3 = await waits[2]!;
    expect(h3.name).toBe(`${prefix}0`);
    expect(holderOf(`${prefix}0`)).toBe('node-w3');
    expect(writes(`${prefix}0`)).toBe(writes0 + 1); // the hand-over only: node-w3 did not write it
    // node-w3 leaves the queue it was in; the others keep their order
    await waitFor('node-w3 out of slot 1’s queue', () => queueOf(lease(`${prefix}1`) as never).length === 2);
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
    await waitFor('node-w queued on slot 0', () => queueOf(lease(`${prefix}0`) as never).includes('node-w'));
    const x = waiter(clock, mk, 'node-x', 0.99); // queued on slot 1
    await waitFor('node-x queued on slot 1', () => queueOf(lease(`${prefix}1`) as never).includes('node-x'));
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
      await waitFor('the join held at the server', () => server.patchesHeld > 0); // the join has reached the server
      // slot 1 handed to node-w (as a holder taking a waiter from another queue) while its join is in flight
      handTo(`${prefix}1`, 'node-w', clock);
      const hw = await w;
      expect(hw.name).toBe(`${prefix}1`);
      // the join landed, then the leave: node-w is in no queue of slot 0
      await waitFor(
        'the join landed, then the leave',
        () => joins() >= 2 && !queueOf(lease(`${prefix}0`) as never).includes('node-w'),
      );
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
    await waitFor('node-w queued on slot 0', () => queueOf(lease(`${prefix}0`) as never).includes('node-w'));
    const waits = ['node-x1', 'node-x2', 'node-x3'].map((n) => waiter(clock, mk, n, 0.99)); // on slot 2
    await waitFor('three nodes queued on slot 2', () => queueOf(lease(`${prefix}2`) as never).length === 3);
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
