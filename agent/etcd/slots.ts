/**
 * EtcdSlots: at most N nodes upgrade at once, by etcd's own semaphore recipe
 * (the rank arithmetic and its safety argument: queue.ts). A node that wants
 * a slot puts ONE key `<prefix>queue/<node>/<lease id>`, bound to the lease it
 * keeps while it takes part (session.ts), and holds a slot once fewer than N
 * live queue keys were created before its own. No transaction races another:
 * the order is etcd's create revision, and a rank only falls. Release
 * deletes the key; a holder or waiter that dies stops renewing, and etcd
 * deletes its key when the lease lapses.
 *
 * A waiter lists the keys ahead of it (newest first, at most N + 2H) in one
 * read-only transaction that also checks that its own key still exists. Near
 * the front (fewer keys ahead than that) it watches the queue's deletes from
 * the listed revision (no gap, no polling) and counts them down; its own
 * key's delete (a lapsed lease) ends the wait. Further back it follows the
 * key H places ahead of it and lists again when that key announces it is
 * near the front (rank < N + H, one guarded put) or goes away: a hand-over
 * wakes about 2H waiters, not the whole fleet.
 */
import { Range, type ComparatorBuilder, type Etcd3 } from 'etcd3';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { unavailable } from './client.js';
import { fleetKeys, isLiveQueueKey, nodeQueuePrefix } from './keys.js';
import { decodeEntry, encodeEntry, listLimit, type AheadKey } from './queue.js';
import { EtcdSession, type SessionLease } from './session.js';
import { QueueWait, gone, type Mine } from './queue-wait.js';

export interface EtcdSlotsDeps {
  readonly client: Etcd3;
  /** The key prefix, ending in '/': the queue lives under `<prefix>queue/`. */
  readonly prefix: string;
  /** This node's name, in its queue key's value (who waits or holds). */
  readonly holder: string;
  /** The slot lease's TTL: how long a dead holder keeps its slot. */
  readonly ttlSeconds: number;
  readonly clock: Clock;
  readonly log: Logger;
  /**
   * A waiter that joins with k > N + 2H keys ahead first looks where it
   * stands after (k - N - 2H) x this many ms: the start-up burst is spread,
   * the waiters near the front are served first. Default MIN_SWAP_MS / N
   * (queue.ts firstLookMs).
   */
  readonly followSpreadMs?: number;
}

interface Held {
  readonly key: string;
  readonly lease: SessionLease;
  /** Stops listening for the lease's loss (the slot is left). */
  readonly unlisten: () => void;
}

export class EtcdSlots {
  private readonly session: EtcdSession;
  private taking = false;

  constructor(private readonly d: EtcdSlotsDeps) {
    this.session = new EtcdSession({ client: d.client, ttlSeconds: d.ttlSeconds, log: d.log });
  }

  get queuePrefix(): string {
    return fleetKeys(this.d.prefix).queue;
  }

  /** Grants the node's lease ahead of need: a node told to upgrade then queues with one request. */
  warm(): void {
    this.session.warm();
  }

  /** Revokes the node's lease (shutdown): call once no withSlot is under way. */
  close(): Promise<void> {
    return this.session.close();
  }

  /** Takes a slot (waiting as long as it takes), runs fn, releases the slot, also when fn throws. */
  async withSlot<T>(maxConcurrent: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    if (this.taking) throw new SpcdError('INTERNAL', 'a node takes one fleet slot at a time');
    this.taking = true;
    try {
      const held = await this.acquire(maxConcurrent, signal);
      try {
        return await fn();
      } finally {
        await this.leave(held, 'released');
      }
    } finally {
      this.taking = false;
    }
  }

  /**
   * The queue as etcd has it now, oldest first: with N slots, the first N
   * hold one (or are about to learn so), the rest wait.
   */
  async queue(): Promise<{ key: string; node: string; near: boolean }[]> {
    try {
      const res = await this.d.client.getAll().prefix(this.queuePrefix).sort('Create', 'Ascend').exec();
      return res.kvs.map((kv) => ({ key: kv.key.toString(), ...decodeEntry(kv.value.toString()) }));
    } catch (err) {
      throw unavailable(err, 'listing the slot queue');
    }
  }

  /** Who holds a slot now, with N slots: queue key -> node, the N oldest keys. */
  async holders(n: number): Promise<Record<string, string>> {
    return Object.fromEntries((await this.queue()).slice(0, n).map((e) => [e.key, e.node]));
  }

  private async acquire(n: number, signal: AbortSignal): Promise<Held> {
    if (signal.aborted) throw new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled');
    const { log } = this.d;
    const lease = await this.session.lease();
    const key = `${nodeQueuePrefix(this.d.prefix, this.d.holder)}${lease.id}`;
    let taken = false;
    let onLost: ((err: Error) => void) | undefined;
    const unlisten = lease.onLost((err) => {
      if (taken) log.warn({ slot: key, err: err.message }, 'fleet slot lease lost; the upgrade goes on');
      onLost?.(err);
    });
    const held: Held = { key, lease, unlisten };
    try {
      await this.take(n, key, lease.id, signal, (f) => (onLost = f));
    } catch (err) {
      // the join may have landed though its answer was lost: our key goes either way
      await this.leave(held, 'left');
      throw err;
    }
    taken = true;
    log.info({ slot: key }, 'fleet slot taken');
    return held;
  }

  /**
   * Deletes our queue key (it is ours alone: named by our lease, one take at
   * a time). When etcd does not answer, the lease is abandoned: it lapses
   * after its TTL and takes the key with it; the next take grants a new one.
   */
  private async leave(held: Held, what: 'released' | 'left'): Promise<void> {
    held.unlisten();
    try {
      await this.d.client.delete().key(held.key).exec();
      if (what === 'released') this.d.log.info({ slot: held.key }, 'fleet slot released');
    } catch (err) {
      this.session.abandon(held.lease);
      this.d.log.warn(
        { slot: held.key, err: (err as Error).message, ttlSeconds: this.d.ttlSeconds },
        `fleet slot ${what === 'released' ? 'release' : 'leave'} failed; it frees when its lease expires`,
      );
    }
  }

  /** Puts this node's queue key (bound to the lease); resolves with it once fewer than n keys are ahead. */
  private async take(
    n: number,
    key: string,
    leaseId: string,
    signal: AbortSignal,
    setOnLost: (f: (err: Error) => void) => void,
  ): Promise<string> {
    const { client, holder } = this.d;
    // One transaction: our key, and how many keys the queue has with it (ours is the newest).
    const all = Range.prefix(this.queuePrefix);
    let res;
    try {
      res = await client
        .if(key, 'Create', '==', 0)
        .then(
          client
            .put(key)
            .value(encodeEntry({ node: holder, near: false }))
            .lease(leaseId),
          {
            request_range: { key: all.start, range_end: all.end, count_only: true },
          },
        )
        .commit();
    } catch (err) {
      throw unavailable(err, 'joining the slot queue');
    }
    if (!res.succeeded) throw new SpcdError('INTERNAL', `slot queue key ${key} already exists`, { key });
    // a new key: the transaction's revision is its create revision
    const me = { key, leaseId, mine: res.header.revision };
    const count = Number(res.responses[1]?.response_range?.count);
    const ahead = Number.isInteger(count) && count > 0 ? count - 1 : Infinity; // Infinity: look first
    const wait = new QueueWait(
      {
        client: this.d.client,
        clock: this.d.clock,
        log: this.d.log,
        queuePrefix: this.queuePrefix,
        ...(this.d.followSpreadMs !== undefined ? { followSpreadMs: this.d.followSpreadMs } : {}),
        listAhead: (n, me) => this.listAhead(n, me),
        announce: (me) => this.announce(me),
      },
      n,
      me,
      signal,
    );
    return wait.begin(ahead, setOnLost);
  }

  /**
   * One read-only transaction: the keys created before ours, newest first, at
   * most listLimit(n) of them, and only while our key is still the one we put.
   */
  private async listAhead(
    n: number,
    me: Mine,
    limit = listLimit(n),
  ): Promise<{ ahead: AheadKey[]; more: boolean; revision: string }> {
    const list = this.d.client
      .getAll()
      .prefix(this.queuePrefix)
      .maxCreateRevision(String(BigInt(me.mine) - 1n))
      .sort('Create', 'Descend')
      .limit(limit);
    const res = await this.whileMine(me, list, 'listing the slot queue');
    const range = res.responses[0]!.response_range;
    // only live keys count: one without a lease (or under another's name) would hold a slot forever
    const ahead = range.kvs
      .map((kv) => ({ key: kv.key.toString(), value: kv.value.toString(), lease: String(kv.lease) }))
      .filter((kv) => isLiveQueueKey(this.queuePrefix, kv.key, kv.lease, decodeEntry(kv.value).node))
      .map(({ key, value }) => ({ key, value }));
    if (ahead.length < range.kvs.length && range.more && limit > 0) {
      this.d.log.warn(
        { ignored: range.kvs.length - ahead.length },
        'slot queue holds keys no live node put (no lease, or another node name); listing it whole',
      );
      return this.listAhead(n, me, 0); // 0: no limit
    }
    return { ahead, more: range.more, revision: res.header.revision };
  }

  /** Marks our key near the front (one guarded put): whoever follows it looks again. */
  private async announce(me: Mine): Promise<void> {
    const put = this.d.client
      .put(me.key)
      .value(encodeEntry({ node: this.d.holder, near: true }))
      .lease(me.leaseId);
    await this.whileMine(me, put, 'announcing a place near the front of the slot queue');
  }

  /** Runs one operation in a transaction, only while our queue key is still the one we put. */
  private async whileMine(me: Mine, op: Parameters<ComparatorBuilder['then']>[0], during: string) {
    const { client } = this.d;
    let res;
    try {
      res = await client.if(me.key, 'Create', '==', me.mine).then(op).commit();
    } catch (err) {
      throw unavailable(err, during);
    }
    if (!res.succeeded) throw gone(me.key);
    return res;
  }
}
