/**
 * waitForSlot: a node that found every slot busy queues on one slot (the
 * shortest queue its pass saw; fleet-slots.ts) and waits without polling and
 * without racing the other waiters:
 * - it watches, by label selector, the slots handed to it (the holder that
 *   finishes writes holderIdentity := the head of the queue): seeing itself
 *   holder, it holds the slot, with no write of its own. One write per turn,
 *   one node woken, and the API server sends each waiter nothing else;
 * - it watches, the same way, the slot whose queue it heads, for the holder's
 *   expiry: at renewTime + duration (a timer, on this node's clock) it takes
 *   the slot over;
 * - a slot free with nobody queued (released before anyone queued, or
 *   deleted) is taken after a random delay in [0, wakeSpreadMs), doubled per 409.
 * A write refused with 409 (someone else wrote the slot first) reads the slot
 * and decides again. Every max(pollMs, 2 lease durations) (±50%) a pass over
 * all slots is the safety net for what no watch shows (a holder and the head
 * of its queue both dead). A lost watch ends the wait ('lost': the caller
 * polls slowly; the next wait finds this node still queued); 410 Gone ends it
 * with 'relist'.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { WatchHandle } from './client.js';
import { SlotHandle, queueOf, type FleetSlots } from './fleet-slots.js';
import { enqueue, handOn, leaveQueue } from './slot-queue-writes.js';

export interface SlotWaitOptions {
  readonly clock: Clock;
  readonly log: Logger;
  readonly random: () => number;
  /** A free slot nobody is queued on is tried after a random delay in [0, wakeSpreadMs), doubled per 409. */
  readonly wakeSpreadMs: number;
  /** The safety-net pass runs every max(pollMs, 2 lease durations), jittered ±50%. */
  readonly pollMs: number;
  readonly signal?: AbortSignal;
}

/** Why a wait ended without a slot: list again now ('relist') or after the slow poll ('lost'). */
export type WaitEnd = 'relist' | 'lost';

/**
 * The slot to queue on: the one we are queued on already, else the shorter
 * queue of two slots picked at random (every waiter listing at once would
 * otherwise pick the same shortest queue and contend for it).
 */
function pickSlot(slots: FleetSlots, leases: Map<string, V1Lease>, random: () => number): string {
  for (let i = 0; i < slots.slots; i++) {
    const name = slots.slotName(i);
    if (queueOf(leases.get(name)).includes(slots.holder)) return name;
  }
  const a = slots.slotName(Math.floor(random() * slots.slots));
  const b = slots.slotName(Math.floor(random() * slots.slots));
  return queueOf(leases.get(b)).length < queueOf(leases.get(a)).length ? b : a;
}

/**
 * Queues and watches from `pass` until a slot is ours (resolves the handle)
 * or the watch cannot go on (resolves 'relist' / 'lost'). Rejects when the API
 * server refuses a write for another reason than 409, or on abort (leaving
 * the queue in the background).
 */
export function waitForSlot(
  slots: FleetSlots,
  pass: { leases: Map<string, V1Lease>; resourceVersion: string },
  opts: SlotWaitOptions,
): Promise<SlotHandle | WaitEnd> {
  const { clock, log, random } = opts;
  const me = slots.holder;
  const seen = new Map(pass.leases);
  const mine = pickSlot(slots, seen, random);
  const handles: WatchHandle[] = [];
  let settled = false;
  /** A write of ours in flight: nothing else is tried meanwhile. */
  let busy = false;
  /** Our watch is established (the server will send what concerns us from now on). */
  let watching = false;
  /** Watch events about our slot so far. */
  let events = 0;
  /** 409s so far: each doubles the spread of a contested try (how many race is unknown). */
  let losses = 0;
  let cancelAction: (() => void) | undefined;
  let cancelExpiry: (() => void) | undefined;
  let cancelPoll: (() => void) | undefined;
  /** The last call run(): a wait that ends leaves the queue only once it has landed. */
  let inflight: Promise<unknown> = Promise.resolve();
  /** The slot this wait ended holding, while its watch goes on. */
  let held: SlotHandle | undefined;
  const pollMs = Math.max(opts.pollMs, 2000 * slots.leaseDurationSeconds);

  return new Promise<SlotHandle | WaitEnd>((resolve, reject) => {
    const finish = (v: SlotHandle | WaitEnd | SpcdError): void => {
      if (settled) return;
      settled = true;
      if (v instanceof SlotHandle && v.state === 'held') {
        // The watch goes on while the slot is held (SlotHandle.unfollow).
        held = v;
        v.waited = true;
        v.unfollow = () => {
          held = undefined;
          for (const h of handles.splice(0)) h.stop();
        };
      } else for (const h of handles.splice(0)) h.stop();
      cancelAction?.();
      cancelExpiry?.();
      cancelPoll?.();
      opts.signal?.removeEventListener('abort', onAbort);
      // Queued here but done waiting here (aborted, or a slot elsewhere): leave
      // the queue, or hand on what was handed to us meanwhile.
      if (v instanceof SpcdError || (v instanceof SlotHandle && v.name !== mine))
        // After a join still in flight: leaving first would leave its key behind for good.
        void inflight.then(() => leaveQueue(slots, mine)).catch(() => undefined);
      if (v instanceof SpcdError) reject(v);
      else resolve(v);
    };
    const onAbort = (): void => finish(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    const failed = (err: unknown): void =>
      finish(isSpcdError(err) ? err : new SpcdError('KUBE_UNAVAILABLE', String(err)));

    /**
     * Runs one call; nothing else is tried meanwhile. Then decides again. What
     * the call read or wrote is our view of the slot only if the watch showed
     * nothing newer while it ran (`fresh`).
     */
    const run = <T>(fn: () => Promise<T>, done: (v: T, fresh: boolean) => void): void => {
      cancelAction = undefined;
      if (settled || busy) return;
      busy = true;
      const before = events;
      const call = fn();
      inflight = call.catch(() => undefined);
      call.then(
        (v) => {
          busy = false;
          if (!settled) done(v, events === before);
          consider();
        },
        (err: unknown) => {
          busy = false;
          failed(err);
        },
      );
    };
    /** A 409: someone wrote the slot first. Read it as it is now (the only view a waiter not heading the queue has). */
    const refused = (): void => {
      losses = Math.min(losses + 1, 4);
      run(
        () => slots.read(mine),
        (now, fresh) => {
          if (fresh && now) seen.set(mine, now);
          else if (fresh) seen.delete(mine);
        },
      );
    };
    const take = (lease: V1Lease | undefined): void =>
      run(
        () => slots.tryTake(mine, lease),
        (h) => (h ? finish(h) : refused()),
      );
    const join = (lease: V1Lease): void =>
      run(
        () => enqueue(slots, mine, lease),
        (written, fresh) => {
          if (!written) refused();
          else if (fresh) seen.set(mine, written);
        },
      );

    const later = (ms: number, fn: () => void): void => {
      cancelAction?.();
      cancelAction = undefined;
      if (ms <= 0) fn();
      else cancelAction = clock.setTimer(ms, fn);
    };
    const spread = (): number => Math.floor(random() * opts.wakeSpreadMs * 2 ** losses);

    /** Decides what the slot as last seen asks of us: hold it, take it, queue, or wait for its expiry. */
    const consider = (): void => {
      if (settled || busy) return;
      cancelAction?.();
      cancelAction = undefined;
      cancelExpiry?.();
      cancelExpiry = undefined;
      const lease = seen.get(mine);
      if (!lease) return later(spread(), () => take(undefined)); // deleted (or never made)
      const now = clock.now();
      const queue = queueOf(lease);
      const rank = queue.indexOf(me);
      if (lease.spec?.holderIdentity === me) {
        // Handed to us: ours with no write of our own, unless it has run out already.
        if ((slots.expiresAt(lease) ?? 0) > now) return finish(new SlotHandle(mine, lease, now));
        return take(lease);
      }
      if (slots.isFree(mine, lease)) {
        // Free, or expired: the head of the queue takes it; a node not queued
        // takes it only when nobody is queued, else it queues.
        if (rank === 0) return take(lease);
        if (rank < 0 && queue.length === 0) return later(spread(), () => take(lease));
        if (rank < 0) return watching ? later(spread(), () => join(lease)) : undefined;
        return; // in line behind a head that is alive (the safety-net pass covers one that is not)
      }
      // Joined only once the watch is up: a slot handed over before it would go unseen until expiry.
      if (rank < 0) return watching ? later(queue.length === 0 ? 0 : spread(), () => join(lease)) : undefined;
      const until = slots.heldUntil(lease);
      if (rank === 0 && until !== undefined) cancelExpiry = clock.setTimer(until - now + 1, () => consider());
    };

    /**
     * Holding a slot: what the watch shows of it is our freshest copy (the
     * release then seldom meets a 409 from a node that queued meanwhile); a
     * second slot handed to us (two holders both gave us theirs) is handed on.
     */
    const whileHeld = (name: string, lease: V1Lease): void => {
      if (!held || lease.spec?.holderIdentity !== me) return;
      if (name === held.name) {
        if (held.state === 'held') held.lease = lease;
        return;
      }
      const now = clock.now();
      if ((slots.expiresAt(lease) ?? 0) > now) void handOn(slots, name, lease).catch(() => undefined);
    };

    /** Slots handed to us, and the slot whose queue we head. */
    const follow = (from: string): void => {
      let gone = false;
      let at = from;
      slots
        .watch(
          at,
          (type, obj) => {
            if (type === 'ERROR') {
              if ((obj as { code?: unknown }).code === 410) gone = true;
              return;
            }
            if (type === 'BOOKMARK') return;
            const lease = obj as V1Lease;
            const name = lease.metadata?.name;
            if (lease.metadata?.resourceVersion) at = lease.metadata.resourceVersion;
            if (!name || slots.slotIndex(lease) === undefined) return;
            if (settled) return type === 'DELETED' ? undefined : whileHeld(name, lease);
            if (name === mine) events++;
            if (type === 'DELETED') {
              if (name === mine) seen.delete(name);
            } else if (name === mine) seen.set(name, lease);
            else if (lease.spec?.holderIdentity === me) {
              // Handed a slot we are not queued on (we were, before a restart of this wait).
              const expires = slots.expiresAt(lease) ?? 0;
              if (expires > clock.now()) return finish(new SlotHandle(name, lease, clock.now()));
            }
            consider();
          },
          (err) => {
            if (settled) {
              if (!err && held) follow(at); // the server's timeout: go on following the held slot
              return;
            }
            if (gone || isSpcdError(err, 'KUBE_GONE')) return finish('relist');
            if (err) {
              log.warn({ code: (err as SpcdError).code }, 'slot watch lost; polling slowly until it is back');
              return finish('lost');
            }
            follow(at); // the server closed the stream at its timeout: go on from where we were
          },
        )
        .then(
          (h) => {
            if (settled && !held) h.stop();
            else if (settled) handles.push(h);
            else {
              handles.push(h);
              watching = true;
              consider();
            }
          },
          () => finish('lost'),
        );
    };
    follow(pass.resourceVersion);
    consider();

    // The safety net, rare: a pass over all slots (one list), for what no
    // watch shows: a holder and the head of its queue both dead.
    const schedulePoll = (): void => {
      cancelPoll = clock.setTimer(Math.max(1, Math.round(pollMs * (0.5 + random()))), () => {
        if (settled) return;
        if (busy) return schedulePoll();
        busy = true;
        slots.pass().then(
          (p) => {
            busy = false;
            if (p.handle && settled) void slots.release(p.handle).catch(() => undefined);
            else if (p.handle) finish(p.handle);
            else {
              const now = p.leases.get(mine);
              if (now) seen.set(mine, now);
              schedulePoll();
              consider();
            }
          },
          (err: unknown) => {
            busy = false;
            failed(err);
          },
        );
      });
    };
    schedulePoll();
  });
}
