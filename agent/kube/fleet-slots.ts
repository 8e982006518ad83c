/**
 * FleetSlots: at most N nodes upgrade at once. Each slot is a Lease
 * `<prefix><i>` in coordination.k8s.io/v1; a node holds a slot while its
 * holderIdentity is the node's name and the Lease's record has changed
 * within the lease duration, as the observing node's own clock measures it
 * (lease-observer.ts: renewTime is never read as a time). Slots change hands only through the API server's optimistic
 * concurrency: create (409 AlreadyExists = someone else made it) and update
 * with the resourceVersion we read (409 Conflict = we lost the race).
 *
 * Nodes waiting for a busy slot queue on it: each adds its own annotation
 * `queue.spcd.openstack.org/<node>` = {node, at} with a JSON merge patch (its
 * own key: waiters never conflict with each other; first come first served
 * by `at`, then name). A holder that finishes hands the slot to the head of
 * the queue in the same guarded write that gives it up (holderIdentity := the
 * head, its key removed), so a freed slot costs one write and wakes one node,
 * not a race among all waiters. The label `slot.spcd.openstack.org/<node>`
 * marks the slot a node holds and the one whose queue it heads, so each
 * waiter watches with one label selector and hears only of its own turn.
 * A waiter's own queue writes (join, leave, hand on) are in
 * slot-queue-writes.ts; the queue's pure parts in slot-queue.ts.
 */
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { KubeApi, WatchEventType, WatchHandle } from './client.js';
import { LeaseObserver } from './lease-observer.js';
import { fromMicroTime } from './lease-time.js';
import {
  CONCERNS_PREFIX,
  SLOT_LABEL,
  nodeLabel,
  queueOf,
  handedOver,
  slotMeta,
  waiterToSteal,
} from './slot-queue.js';

export {
  CONCERNS_PREFIX,
  HOLDER_LABEL,
  NEXT_LABEL,
  QUEUE_PREFIX,
  SLOT_LABEL,
  nodeLabel,
  queueOf,
} from './slot-queue.js';

export interface FleetSlotsDeps {
  readonly api: KubeApi;
  readonly namespace: string;
  /** This node's identity in holderIdentity (the Node name). */
  readonly holder: string;
  readonly clock: Clock;
  readonly log: Logger;
  /** [0,1) source for where a pass starts; injectable for tests. */
  readonly random?: () => number;
}

export interface FleetSlotsOptions {
  /** N: how many nodes may upgrade at once. */
  readonly slots: number;
  readonly leaseDurationSeconds: number;
  /** How often a holder renews; default a third of the lease duration. */
  readonly renewIntervalMs?: number;
  readonly prefix?: string;
}

export interface SlotView {
  readonly name: string;
  readonly holder: string | null;
  readonly renewedAt: number | null;
  readonly expiresAt: number | null;
  readonly expired: boolean;
}

export type SlotState = 'held' | 'lost' | 'released';

export class SlotHandle {
  state: SlotState = 'held';
  /**
   * Set by a wait that ended holding the slot: its watch goes on while the
   * slot is held (h.lease kept as fresh as the watch shows it, so a renewal
   * or the release seldom meets a 409; a second slot handed to this node
   * meanwhile is handed on). release() and a lost renewal stop it.
   */
  unfollow: (() => void) | undefined;
  /** Got by waiting in a queue (not from a free slot): slots are contended, so a release with nobody queued looks for a waiter elsewhere. */
  waited = false;
  constructor(
    readonly name: string,
    public lease: V1Lease,
    readonly acquiredAt: number,
  ) {}
}

export class FleetSlots {
  readonly slots: number;
  readonly leaseDurationSeconds: number;
  readonly renewIntervalMs: number;
  private readonly prefix: string;
  private readonly random: () => number;
  private readonly observer: LeaseObserver;

  constructor(
    private readonly deps: FleetSlotsDeps,
    opts: FleetSlotsOptions,
  ) {
    if (!Number.isInteger(opts.slots) || opts.slots < 1)
      throw new SpcdError('SETTINGS_INVALID', `fleet slots must be a positive integer, got ${opts.slots}`);
    if (!(opts.leaseDurationSeconds >= 1) || !Number.isInteger(opts.leaseDurationSeconds))
      throw new SpcdError('SETTINGS_INVALID', 'leaseDurationSeconds must be an integer >= 1');
    this.slots = opts.slots;
    this.leaseDurationSeconds = opts.leaseDurationSeconds;
    this.renewIntervalMs = opts.renewIntervalMs ?? Math.floor((opts.leaseDurationSeconds * 1000) / 3);
    this.prefix = opts.prefix ?? 'spcd-upgrade-slot-';
    this.random = deps.random ?? Math.random;
    this.observer = new LeaseObserver(deps.clock, opts.leaseDurationSeconds);
  }

  /** This node's name, as it appears in holderIdentity and in queues. */
  get holder(): string {
    return this.deps.holder;
  }

  slotName(i: number): string {
    return `${this.prefix}${i}`;
  }

  /**
   * When a lease stops counting as held, by this node's clock (the time it
   * saw the lease's record change, plus the duration: lease-observer.ts);
   * undefined when free.
   */
  expiresAt(lease: V1Lease): number | undefined {
    return this.observer.expiresAt(lease);
  }

  private isHeldByOther(lease: V1Lease, now: number): boolean {
    const holder = lease.spec?.holderIdentity;
    if (!holder || holder === this.deps.holder) return false;
    const exp = this.expiresAt(lease);
    return exp !== undefined && exp > now;
  }

  /**
   * The lease with us as holder, out of its queue, and so are the nodes queued
   * before us: taking a slot free or expired, they missed their turn (dead,
   * or they would have taken it); one still alive queues again.
   */
  private taken(lease: V1Lease | undefined, name: string, now: number): V1Lease {
    const prev = lease?.spec;
    const changed = prev?.holderIdentity !== this.deps.holder;
    const queue = queueOf(lease);
    const leaving = [...queue.slice(0, queue.indexOf(this.deps.holder) + 1), this.deps.holder];
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: slotMeta(lease, name, this.deps.namespace, this.deps.holder, leaving),
      spec: {
        holderIdentity: this.deps.holder,
        leaseDurationSeconds: this.leaseDurationSeconds,
        acquireTime: changed ? new V1MicroTime(now) : (prev?.acquireTime ?? new V1MicroTime(now)),
        renewTime: new V1MicroTime(now),
        leaseTransitions: (prev?.leaseTransitions ?? 0) + (lease && changed ? 1 : 0),
      },
    };
  }

  /**
   * One pass over the slots. Resolves a handle, or undefined when every slot
   * is held by another live node. Rejects KUBE_UNAVAILABLE when the API server
   * does not answer: then no upgrade may start.
   */
  async acquire(): Promise<SlotHandle | undefined> {
    return (await this.pass()).handle;
  }

  /** A pass, and what it listed: the slots by name and the list's resourceVersion (to watch from). */
  async pass(): Promise<{ handle?: SlotHandle; leases: Map<string, V1Lease>; resourceVersion: string }> {
    const list = await this.deps.api.listLeases(this.deps.namespace, `${SLOT_LABEL}=true`);
    const leases = new Map<string, V1Lease>();
    for (const l of list.items) if (l.metadata?.name) leases.set(l.metadata.name, l);
    const resourceVersion = list.metadata?.resourceVersion ?? '';
    // A slot handed to us while we were not watching (a lost watch): ours already.
    const handed = [...leases.values()].find(
      (l) => l.spec?.holderIdentity === this.deps.holder && this.slotIndex(l) !== undefined,
    );
    if (handed?.metadata?.name) {
      const handle = await this.tryTake(handed.metadata.name, handed);
      return handle ? { handle, leases, resourceVersion } : { leases, resourceVersion };
    }
    const start = Math.floor(this.random() * this.slots);
    for (let k = 0; k < this.slots; k++) {
      const name = this.slotName((start + k) % this.slots);
      const seen = leases.get(name);
      if (seen && this.isHeldByOther(seen, this.deps.clock.now())) continue;
      // A 409 ends the pass: our list is stale, and so is what it says of the
      // other slots. Racing the whole fleet for each of them costs more.
      const handle = await this.tryTake(name, seen);
      return handle ? { handle, leases, resourceVersion } : { leases, resourceVersion };
    }
    return { leases, resourceVersion };
  }

  /** The slot's index when `lease` is one of this set's N slots. */
  slotIndex(lease: V1Lease): number | undefined {
    const name = lease.metadata?.name ?? '';
    if (!name.startsWith(this.prefix)) return undefined;
    const i = Number(name.slice(this.prefix.length));
    return Number.isInteger(i) && i >= 0 && i < this.slots && this.slotName(i) === name ? i : undefined;
  }

  /** Whether `name` is free to take by what we saw of it (absent, no holder, expired, or ours). */
  isFree(name: string, seen: V1Lease | undefined): boolean {
    return !seen || !this.isHeldByOther(seen, this.deps.clock.now());
  }

  /** When a slot held by another node stops counting as held, by this node's clock. */
  heldUntil(seen: V1Lease): number | undefined {
    return this.isHeldByOther(seen, this.deps.clock.now()) ? this.expiresAt(seen) : undefined;
  }

  /**
   * Takes one slot as last seen: create when absent, else update guarded by
   * the seen resourceVersion. Undefined on 409 (someone else got there first).
   */
  async tryTake(name: string, seen: V1Lease | undefined): Promise<SlotHandle | undefined> {
    const { api, namespace, log } = this.deps;
    const now = this.deps.clock.now();
    try {
      if (!seen) {
        const created = await api.createLease(namespace, this.taken(undefined, name, now));
        log.info({ slot: name }, 'fleet slot created and taken');
        return new SlotHandle(name, created, now);
      }
      const got = await api.replaceLease(namespace, name, this.taken(seen, name, now));
      log.info({ slot: name, previous: seen.spec?.holderIdentity ?? null }, 'fleet slot taken');
      return new SlotHandle(name, got, now);
    } catch (err) {
      if (isSpcdError(err, 'LEASE_CONFLICT')) return undefined;
      throw err;
    }
  }

  /** Reads one slot as it is now; undefined when it does not exist. */
  async read(name: string): Promise<V1Lease | undefined> {
    try {
      return await this.deps.api.readLease(this.deps.namespace, name);
    } catch (err) {
      if (isSpcdError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /**
   * A JSON merge patch of one slot (no resourceVersion: a queue member's own
   * keys, slot-queue-writes.ts). Resolves the lease patched, or undefined
   * when the slot is gone.
   */
  async patchSlot(name: string, patch: object): Promise<V1Lease | undefined> {
    try {
      return await this.deps.api.patchLease(this.deps.namespace, name, patch);
    } catch (err) {
      if (isSpcdError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /** This node's clock now (a queue entry's `at`). */
  now(): number {
    return this.deps.clock.now();
  }

  /**
   * Follows, from `resourceVersion`, the slots that concern this node: one
   * handed to it, and the one whose queue it heads (for its holder's expiry).
   * A label selector: the API server sends nothing about other nodes' turns.
   */
  watch(
    resourceVersion: string,
    onEvent: (type: WatchEventType, obj: V1Lease | Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
    timeoutSeconds = 300,
  ): Promise<WatchHandle> {
    return this.deps.api.watchLeases(
      this.deps.namespace,
      {
        labelSelector: `${SLOT_LABEL}=true,${CONCERNS_PREFIX}${nodeLabel(this.deps.holder)}=true`,
        resourceVersion,
        timeoutSeconds,
      },
      onEvent,
      onDone,
    );
  }

  /** Pushes renewTime forward. Marks the handle lost when another node holds the slot now. */
  async renew(h: SlotHandle): Promise<void> {
    if (h.state !== 'held') return;
    const { api, namespace, log } = this.deps;
    for (let attempt = 0; attempt < 8; attempt++) {
      const now = this.deps.clock.now();
      try {
        h.lease = await api.replaceLease(namespace, h.name, this.taken(h.lease, h.name, now));
        return;
      } catch (err) {
        if (!isSpcdError(err, 'LEASE_CONFLICT')) throw err;
        const current = await api.readLease(namespace, h.name);
        if (current.spec?.holderIdentity !== this.deps.holder) {
          h.state = 'lost';
          h.unfollow?.();
          log.warn({ slot: h.name, holder: current.spec?.holderIdentity ?? null }, 'fleet slot lost');
          return;
        }
        h.lease = current; // still ours (e.g. a renew whose answer we missed): retry with its RV
      }
    }
  }

  /**
   * Gives the slot up: hands it to the head of its queue in the same write
   * (holderIdentity := the head, renewTime now, the head leaves the queue);
   * with nobody queued, when it got the slot by waiting (slots contended),
   * to a node waiting in the longest queue of another slot (one list:
   * waiterToSteal); else clears holderIdentity, so the next node needs no
   * expiry wait. On 409 (a node queued meanwhile) reads it and
   * tries again. Never throws on a lost slot.
   */
  async release(h: SlotHandle): Promise<void> {
    try {
      await this.handOver(h);
    } finally {
      h.unfollow?.();
    }
  }

  private async handOver(h: SlotHandle): Promise<void> {
    if (h.state !== 'held') return;
    const { api, namespace, log } = this.deps;
    let lease = h.lease;
    let stolen: string | undefined;
    let looked = false;
    // Nodes queueing meanwhile make 409s: go on while the slot is ours (it
    // would be lost only at expiry, and then its holder is someone else).
    for (let attempt = 0; attempt < 100; attempt++) {
      if (lease.spec?.holderIdentity !== this.deps.holder) break;
      let [next] = queueOf(lease).filter((n) => n !== this.deps.holder);
      if (!next && !looked && h.waited) {
        looked = true;
        const list = await api.listLeases(namespace, `${SLOT_LABEL}=true`);
        const slots = list.items.filter((l) => this.slotIndex(l) !== undefined);
        const now = slots.find((l) => l.metadata?.name === h.name);
        if (now) lease = now; // as fresh as the list: a node may have queued meanwhile
        stolen = waiterToSteal(slots, h.name, this.deps.holder, this.random);
        continue;
      }
      next ??= stolen;
      const body = handedOver(lease, h.name, namespace, this.deps.holder, next, {
        now: this.deps.clock.now(),
        leaseDurationSeconds: this.leaseDurationSeconds,
      });
      try {
        h.lease = await api.replaceLease(namespace, h.name, body);
        h.state = 'released';
        if (next) log.info({ slot: h.name, next }, 'fleet slot handed over');
        else log.info({ slot: h.name }, 'fleet slot released');
        return;
      } catch (err) {
        if (!isSpcdError(err, 'LEASE_CONFLICT')) throw err;
        lease = await api.readLease(namespace, h.name);
      }
    }
    h.state = 'lost';
  }

  /** Who holds what, by this node's clock. */
  async snapshot(): Promise<SlotView[]> {
    const list = await this.deps.api.listLeases(this.deps.namespace, `${SLOT_LABEL}=true`);
    const now = this.deps.clock.now();
    return list.items
      .map((l) => {
        const exp = this.expiresAt(l) ?? null;
        return {
          name: l.metadata?.name ?? '',
          holder: l.spec?.holderIdentity || null,
          renewedAt: fromMicroTime(l.spec?.renewTime) ?? null,
          expiresAt: exp,
          expired: exp !== null && exp <= now,
        };
      })
      .sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
  }
}
