/**
 * EtcdSlots: at most N nodes upgrade at once. Slot i is the key
 * `<prefix>slots/<i>` (i < N), bound to the holder's etcd lease; it is taken
 * only by a transaction that requires the key to be absent (create revision
 * 0), so two nodes can never hold the same slot, and it goes away when the
 * holder revokes its lease (release) or stops renewing it (a dead node: the
 * lease expires after its TTL and etcd deletes the key).
 *
 * A node that finds every slot held watches the slot prefix from the
 * revision it listed (no gap, no polling) and tries a slot the moment a
 * delete arrives, after a random delay so that the whole fleet does not race
 * for the same freed slot; a waiter that sees the slot taken before its delay
 * ends does not try, and each lost race doubles its spread.
 */
import type { Etcd3, IKeyValue, Lease, Watcher } from 'etcd3';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { unavailable } from './client.js';
import { fleetKeys, slotIndex } from './keys.js';

export interface EtcdSlotsDeps {
  readonly client: Etcd3;
  /** The key prefix, ending in '/': slots live under `<prefix>slots/`. */
  readonly prefix: string;
  /** This node's name, the slot key's value (who holds it). */
  readonly holder: string;
  /** The slot lease's TTL: how long a dead holder keeps its slot. */
  readonly ttlSeconds: number;
  readonly clock: Clock;
  readonly log: Logger;
  readonly random?: () => number;
  /** A freed slot is tried after a random delay in [0, wakeSpreadMs × 2^lost races). Default 20 ms. */
  readonly wakeSpreadMs?: number;
}

interface Held {
  readonly key: string;
  readonly lease: Lease;
  lost: boolean;
}

export class EtcdSlots {
  private readonly random: () => number;

  constructor(private readonly d: EtcdSlotsDeps) {
    this.random = d.random ?? Math.random;
  }

  get slotPrefix(): string {
    return fleetKeys(this.d.prefix).slots;
  }

  slotKey(i: number): string {
    return `${this.slotPrefix}${i}`;
  }

  /** The slot index of a key under the prefix; undefined for anything else. */
  private indexOf(key: string): number | undefined {
    return slotIndex(this.slotPrefix, key);
  }

  /** Takes a slot (waiting as long as it takes), runs fn, releases the slot, also when fn throws. */
  async withSlot<T>(maxConcurrent: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    const held = await this.acquire(maxConcurrent, signal);
    try {
      return await fn();
    } finally {
      await this.release(held);
    }
  }

  /** Who holds which slot now. */
  async holders(): Promise<Record<string, string>> {
    try {
      return await this.d.client.getAll().prefix(this.slotPrefix).strings();
    } catch (err) {
      throw unavailable(err, 'listing the slots');
    }
  }

  private async acquire(n: number, signal: AbortSignal): Promise<Held> {
    if (signal.aborted) throw new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled');
    const { client, ttlSeconds, log } = this.d;
    const lease = client.lease(ttlSeconds, { autoKeepAlive: true });
    const held: Held = { key: '', lease, lost: false };
    let onLost: ((err: Error) => void) | undefined;
    lease.on('lost', (err) => {
      held.lost = true;
      if (held.key)
        log.warn({ slot: held.key, err: err.message }, 'fleet slot lease lost; the upgrade goes on');
      onLost?.(err);
    });
    try {
      const leaseId = await lease.grant().catch((err: unknown) => {
        throw unavailable(err, 'granting the slot lease');
      });
      const key = await this.take(n, leaseId, signal, (f) => (onLost = f));
      log.info({ slot: key }, 'fleet slot taken');
      return Object.assign(held, { key });
    } catch (err) {
      this.drop(lease);
      throw err;
    }
  }

  /** Revokes the lease (the slot key goes with it); when etcd does not answer, lets it expire. */
  private async release(held: Held): Promise<void> {
    try {
      await held.lease.revoke();
      this.d.log.info({ slot: held.key }, 'fleet slot released');
    } catch (err) {
      held.lease.release();
      this.d.log.warn(
        { slot: held.key, err: (err as Error).message, ttlSeconds: this.d.ttlSeconds },
        'fleet slot release failed; it frees when its lease expires',
      );
    }
  }

  private drop(lease: Lease): void {
    void lease.revoke().catch(() => lease.release());
  }

  /** One transaction: slot `key` becomes ours only if nobody holds it. */
  private async tryTake(key: string, leaseId: string): Promise<boolean> {
    const { client, holder } = this.d;
    try {
      const res = await client
        .if(key, 'Create', '==', 0)
        .then(client.put(key).value(holder).lease(leaseId))
        .commit();
      return res.succeeded;
    } catch (err) {
      throw unavailable(err, `taking slot ${key}`);
    }
  }

  /**
   * Lists the slots, tries a free one; when none is free (or the race is
   * lost), watches from the listed revision until a take succeeds.
   */
  private async take(
    n: number,
    leaseId: string,
    signal: AbortSignal,
    setOnLost: (f: (err: Error) => void) => void,
  ): Promise<string> {
    const { client } = this.d;
    const held = new Set<number>();
    let revision: string;
    try {
      const res = await client.getAll().prefix(this.slotPrefix).exec();
      revision = res.header.revision;
      for (const kv of res.kvs) {
        const i = this.indexOf(kv.key.toString());
        if (i !== undefined) held.add(i);
      }
    } catch (err) {
      throw unavailable(err, 'listing the slots');
    }
    const free = this.freeSlots(n, held);
    if (free.length > 0 && (await this.tryTake(this.slotKey(free[0]!), leaseId)))
      return this.slotKey(free[0]!);
    return this.wait(n, leaseId, held, String(BigInt(revision) + 1n), signal, setOnLost);
  }

  /** Free slot indexes below n, starting at a random one (nodes spread over the slots). */
  private freeSlots(n: number, held: ReadonlySet<number>): number[] {
    const start = Math.floor(this.random() * n);
    const out: number[] = [];
    for (let k = 0; k < n; k++) {
      const i = (start + k) % n;
      if (!held.has(i)) out.push(i);
    }
    return out;
  }

  private wait(
    n: number,
    leaseId: string,
    held: Set<number>,
    fromRevision: string,
    signal: AbortSignal,
    setOnLost: (f: (err: Error) => void) => void,
  ): Promise<string> {
    const { client, clock, log } = this.d;
    const spread = this.d.wakeSpreadMs ?? 20;
    let losses = 0;
    let settled = false;
    let trying = false;
    let cancelTimer: (() => void) | undefined;
    let disconnected = false;
    const watcher: Watcher = client.watch().prefix(this.slotPrefix).startRevision(fromRevision).watcher();

    return new Promise<string>((resolve, reject) => {
      const finish = (v: string | SpcdError): void => {
        if (settled) return;
        settled = true;
        cancelTimer?.();
        signal.removeEventListener('abort', onAbort);
        void watcher.cancel().catch(() => undefined);
        if (typeof v === 'string') resolve(v);
        else reject(v);
      };
      const onAbort = (): void => finish(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));
      signal.addEventListener('abort', onAbort, { once: true });
      setOnLost((err) => finish(unavailable(err, 'the slot lease was lost while waiting')));

      const attempt = (): void => {
        cancelTimer = undefined;
        if (settled || trying) return;
        const free = this.freeSlots(n, held);
        if (free.length === 0) return;
        const key = this.slotKey(free[0]!);
        trying = true;
        this.tryTake(key, leaseId).then(
          (ok) => {
            trying = false;
            if (ok && settled) this.d.log.debug({ slot: key }, 'slot taken after the wait ended');
            else if (ok) finish(key);
            else {
              losses = Math.min(losses + 1, 10);
              consider(); // the watch brings who took it
            }
          },
          (err: unknown) => {
            trying = false;
            finish(unavailable(err, `taking slot ${key}`));
          },
        );
      };
      /** Schedules one try when a slot below n is free by what the watch says. */
      const consider = (): void => {
        if (settled || trying) return;
        if (this.freeSlots(n, held).length === 0) {
          cancelTimer?.();
          cancelTimer = undefined;
          return;
        }
        if (cancelTimer) return;
        const delay = Math.floor(this.random() * spread * 2 ** losses);
        cancelTimer = clock.setTimer(Math.max(1, delay), attempt);
      };
      const seen = (kv: IKeyValue, present: boolean): void => {
        const i = this.indexOf(kv.key.toString());
        if (i === undefined) return;
        if (present) held.add(i);
        else held.delete(i);
        consider();
      };
      watcher.on('put', (kv) => seen(kv, true));
      watcher.on('delete', (kv) => seen(kv, false));
      watcher.on('disconnected', () => {
        disconnected = true;
      });
      watcher.on('connected', () => {
        if (!disconnected) return;
        disconnected = false;
        // etcd3 resumes from the last revision seen: nothing was missed; look again anyway.
        log.info('slot watch reconnected');
        consider();
      });
      watcher.on('error', (err) => finish(unavailable(err, 'watching the slots')));
      consider();
    });
  }
}
