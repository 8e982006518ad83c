/**
 * waitForSlot: a node that found every slot busy queues on one slot (the
 * shortest queue its pass saw; fleet-slots.ts) and waits without polling and
 * without racing the other waiters:
 * - it watches, by label selector, the slots handed to it (the holder that
 *   finishes writes holderIdentity := the head of the queue): seeing itself
 *   holder, it holds the slot, with no write of its own. One write per turn,
 *   one node woken, and the API server sends each waiter nothing else;
 * - it watches, the same way, the slot whose queue it heads, for the holder's
 *   expiry: once the holder's record has not changed for a lease duration (a
 *   timer, on this node's clock: lease-observer.ts) it takes the slot over;
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
import { WaitOnce } from '../rollout/wait-once.js';

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
  return new SlotWait(slots, pass.leases, opts).begin(pass.resourceVersion);
}

/**
 * Where the wait is: waiting for a slot; holding the slot it ended with (its
 * watch goes on until SlotHandle.unfollow); or ended.
 */
type WaitState =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'holding'; readonly handle: SlotHandle }
  | { readonly kind: 'ended' };
/** Our call to the API server: none, or one in flight (nothing else is tried meanwhile). */
type CallState = 'idle' | 'calling';
/** Our watch: being established, or up (the server sends what concerns us from now on). */
type WatchState = 'connecting' | 'up';

/** One wait, as a state machine: every watch event, timer and call result goes through consider(). */
class SlotWait {
  private state: WaitState = { kind: 'waiting' };
  private call: CallState = 'idle';
  private watch: WatchState = 'connecting';
  /** Watch events about our slot so far. */
  private events = 0;
  /** 409s so far: each doubles the spread of a contested try (how many race is unknown). */
  private losses = 0;
  /** The pending action (a try after its spread), the holder's expiry, the safety-net pass. */
  private readonly timers: { action?: () => void; expiry?: () => void; poll?: () => void } = {};
  /** The last call run(): a wait that ends leaves the queue only once it has landed. */
  private inflight: Promise<unknown> = Promise.resolve();
  private readonly handles: WatchHandle[] = [];
  private readonly me: string;
  private readonly seen: Map<string, V1Lease>;
  private readonly mine: string;
  private readonly pollMs: number;
  private readonly once: WaitOnce<SlotHandle | WaitEnd>;

  constructor(
    private readonly slots: FleetSlots,
    leases: Map<string, V1Lease>,
    private readonly opts: SlotWaitOptions,
  ) {
    this.me = slots.holder;
    this.seen = new Map(leases);
    this.mine = pickSlot(slots, this.seen, opts.random);
    this.pollMs = Math.max(opts.pollMs, 2000 * slots.leaseDurationSeconds);
    this.once = new WaitOnce(opts.signal, (v) => this.ended(v));
  }

  private get settled(): boolean {
    return this.state.kind !== 'waiting';
  }

  private get held(): SlotHandle | undefined {
    return this.state.kind === 'holding' ? this.state.handle : undefined;
  }

  begin(resourceVersion: string): Promise<SlotHandle | WaitEnd> {
    return this.once.begin(() => {
      if (this.opts.signal?.aborted) return this.once.onAbort();
      this.follow(resourceVersion);
      this.consider();
      this.schedulePoll();
    });
  }

  /** The wait's end: stop what it started; leave the queue when done waiting here. */
  private ended(v: SlotHandle | WaitEnd | SpcdError): void {
    if (v instanceof SlotHandle && v.state === 'held') {
      // The watch goes on while the slot is held (SlotHandle.unfollow).
      this.state = { kind: 'holding', handle: v };
      v.waited = true;
      v.unfollow = () => {
        this.state = { kind: 'ended' };
        for (const h of this.handles.splice(0)) h.stop();
      };
    } else {
      this.state = { kind: 'ended' };
      for (const h of this.handles.splice(0)) h.stop();
    }
    this.timers.action?.();
    this.timers.expiry?.();
    this.timers.poll?.();
    // Queued here but done waiting here (aborted, or a slot elsewhere): leave
    // the queue, or hand on what was handed to us meanwhile.
    if (v instanceof SpcdError || (v instanceof SlotHandle && v.name !== this.mine))
      // After a join still in flight: leaving first would leave its key behind for good.
      void this.inflight.then(() => leaveQueue(this.slots, this.mine)).catch(() => undefined);
  }

  private finish(v: SlotHandle | WaitEnd): void {
    this.once.end(v);
  }

  private failed(err: unknown): void {
    this.once.fail(isSpcdError(err) ? err : new SpcdError('KUBE_UNAVAILABLE', String(err)));
  }

  /**
   * Runs one call; nothing else is tried meanwhile. Then decides again. What
   * the call read or wrote is our view of the slot only if the watch showed
   * nothing newer while it ran (`fresh`).
   */
  private run<T>(fn: () => Promise<T>, done: (v: T, fresh: boolean) => void): void {
    this.timers.action = undefined;
    if (this.settled || this.call === 'calling') return;
    this.call = 'calling';
    const before = this.events;
    const call = fn();
    this.inflight = call.catch(() => undefined);
    call.then(
      (v) => {
        this.call = 'idle';
        if (!this.settled) done(v, this.events === before);
        this.consider();
      },
      (err: unknown) => {
        this.call = 'idle';
        this.failed(err);
      },
    );
  }

  /** A 409: someone wrote the slot first. Read it as it is now (the only view a waiter not heading the queue has). */
  private refused(): void {
    this.losses = Math.min(this.losses + 1, 4);
    this.run(
      () => this.slots.read(this.mine),
      (now, fresh) => {
        if (fresh && now) this.seen.set(this.mine, now);
        else if (fresh) this.seen.delete(this.mine);
      },
    );
  }

  private take(lease: V1Lease | undefined): void {
    this.run(
      () => this.slots.tryTake(this.mine, lease),
      (h) => (h ? this.finish(h) : this.refused()),
    );
  }

  private join(lease: V1Lease): void {
    this.run(
      () => enqueue(this.slots, this.mine, lease),
      (written, fresh) => {
        if (!written) this.refused();
        else if (fresh) this.seen.set(this.mine, written);
      },
    );
  }

  private later(ms: number, fn: () => void): void {
    this.timers.action?.();
    this.timers.action = undefined;
    if (ms <= 0) fn();
    else this.timers.action = this.opts.clock.setTimer(ms, fn);
  }

  private spread(): number {
    return Math.floor(this.opts.random() * this.opts.wakeSpreadMs * 2 ** this.losses);
  }

  /** Decides what the slot as last seen asks of us: hold it, take it, queue, or wait for its expiry. */
  private consider(): void {
    if (this.settled || this.call === 'calling') return;
    this.timers.action?.();
    this.timers.action = undefined;
    this.timers.expiry?.();
    this.timers.expiry = undefined;
    const { slots, mine, me } = this;
    const lease = this.seen.get(mine);
    if (!lease) return this.later(this.spread(), () => this.take(undefined)); // deleted (or never made)
    const now = this.opts.clock.now();
    const queue = queueOf(lease);
    const rank = queue.indexOf(me);
    const watching = this.watch === 'up';
    if (lease.spec?.holderIdentity === me) {
      // Handed to us: ours with no write of our own, unless it has run out already.
      if ((slots.expiresAt(lease) ?? 0) > now) return this.finish(new SlotHandle(mine, lease, now));
      return this.take(lease);
    }
    if (slots.isFree(mine, lease)) {
      // Free, or expired: the head of the queue takes it; a node not queued
      // takes it only when nobody is queued, else it queues.
      if (rank === 0) return this.take(lease);
      if (rank < 0 && queue.length === 0) return this.later(this.spread(), () => this.take(lease));
      if (rank < 0) return watching ? this.later(this.spread(), () => this.join(lease)) : undefined;
      return; // in line behind a head that is alive (the safety-net pass covers one that is not)
    }
    // Joined only once the watch is up: a slot handed over before it would go unseen until expiry.
    if (rank < 0)
      return watching
        ? this.later(queue.length === 0 ? 0 : this.spread(), () => this.join(lease))
        : undefined;
    const until = slots.heldUntil(lease);
    if (rank === 0 && until !== undefined)
      this.timers.expiry = this.opts.clock.setTimer(until - now + 1, () => this.consider());
  }

  /**
   * Holding a slot: what the watch shows of it is our freshest copy (the
   * release then seldom meets a 409 from a node that queued meanwhile); a
   * second slot handed to us (two holders both gave us theirs) is handed on.
   */
  private whileHeld(name: string, lease: V1Lease): void {
    const held = this.held;
    if (!held || lease.spec?.holderIdentity !== this.me) return;
    if (name === held.name) {
      if (held.state === 'held') held.lease = lease;
      return;
    }
    const now = this.opts.clock.now();
    if ((this.slots.expiresAt(lease) ?? 0) > now) void handOn(this.slots, name, lease).catch(() => undefined);
  }

  /** Slots handed to us, and the slot whose queue we head. */
  private follow(from: string): void {
    const cursor = { at: from, gone: false };
    this.slots
      .watch(
        cursor.at,
        (type, obj) => this.onWatchEvent(cursor, type, obj),
        (err) => this.onWatchEnd(cursor, err),
      )
      .then(
        (h) => {
          if (this.settled && !this.held) h.stop();
          else if (this.settled) this.handles.push(h);
          else {
            this.handles.push(h);
            this.watch = 'up';
            this.consider();
          }
        },
        () => this.finish('lost'),
      );
  }

  private onWatchEvent(cursor: WatchCursor, type: string, obj: unknown): void {
    if (type === 'ERROR') {
      if ((obj as { code?: unknown }).code === 410) cursor.gone = true;
      return;
    }
    if (type === 'BOOKMARK') return;
    const { slots, mine, me, seen } = this;
    const lease = obj as V1Lease;
    const name = lease.metadata?.name;
    if (lease.metadata?.resourceVersion) cursor.at = lease.metadata.resourceVersion;
    if (!name || slots.slotIndex(lease) === undefined) return;
    if (this.settled) return type === 'DELETED' ? undefined : this.whileHeld(name, lease);
    if (name === mine) this.events++;
    if (type === 'DELETED') {
      if (name === mine) seen.delete(name);
    } else if (name === mine) seen.set(name, lease);
    else if (lease.spec?.holderIdentity === me) {
      // Handed a slot we are not queued on (we were, before a restart of this wait).
      const expires = slots.expiresAt(lease) ?? 0;
      if (expires > this.opts.clock.now())
        return this.finish(new SlotHandle(name, lease, this.opts.clock.now()));
    }
    this.consider();
  }

  private onWatchEnd(cursor: WatchCursor, err: unknown): void {
    if (this.settled) {
      if (!err && this.held) this.follow(cursor.at); // the server's timeout: go on following the held slot
      return;
    }
    if (cursor.gone || isSpcdError(err, 'KUBE_GONE')) return this.finish('relist');
    if (err) {
      this.opts.log.warn(
        { code: (err as SpcdError).code },
        'slot watch lost; polling slowly until it is back',
      );
      return this.finish('lost');
    }
    this.follow(cursor.at); // the server closed the stream at its timeout: go on from where we were
  }

  /**
   * The safety net, rare: a pass over all slots (one list), for what no
   * watch shows: a holder and the head of its queue both dead.
   */
  private schedulePoll(): void {
    const { clock, random } = this.opts;
    this.timers.poll = clock.setTimer(Math.max(1, Math.round(this.pollMs * (0.5 + random()))), () =>
      this.poll(),
    );
  }

  private poll(): void {
    if (this.settled) return;
    if (this.call === 'calling') return this.schedulePoll();
    this.call = 'calling';
    this.slots.pass().then(
      (p) => {
        this.call = 'idle';
        if (p.handle && this.settled) void this.slots.release(p.handle).catch(() => undefined);
        else if (p.handle) this.finish(p.handle);
        else {
          const now = p.leases.get(this.mine);
          if (now) this.seen.set(this.mine, now);
          this.schedulePoll();
          this.consider();
        }
      },
      (err: unknown) => {
        this.call = 'idle';
        this.failed(err);
      },
    );
  }
}

/** Where a watch has got to, and whether the server said 410 Gone. */
interface WatchCursor {
  at: string;
  gone: boolean;
}
