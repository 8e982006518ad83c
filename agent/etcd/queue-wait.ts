import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { WaitOnce } from '../rollout/wait-once.js';
import { unavailable } from './client.js';
import { decodeEntry, firstLookMs, isNear, place, type AheadKey } from './queue.js';

export interface Mine {
  /** Our queue key, its create revision, the lease it is bound to. */
  readonly key: string;
  readonly mine: string;
  readonly leaseId: string;
}

export function gone(key: string): SpcdError {
  return new SpcdError('ETCD_UNAVAILABLE', `etcd: the slot queue key ${key} is gone (its lease lapsed)`, {
    during: 'waiting for a slot',
    key,
  });
}

/** What a wait reads and watches: the queue, and the two calls of EtcdSlots it makes. */
export interface QueueWaitDeps {
  readonly client: Etcd3;
  readonly clock: Clock;
  readonly log: Logger;
  readonly queuePrefix: string;
  readonly followSpreadMs?: number;
  /** The keys ahead of ours (slots.ts listAhead). */
  listAhead(n: number, me: Mine): Promise<{ ahead: AheadKey[]; more: boolean; revision: string }>;
  /** Marks our key near the front (slots.ts announce). */
  announce(me: Mine): Promise<void>;
}

/**
 * One wait for a slot in the queue (the recipe: slots.ts), ended once
 * (WaitOnce): admitted at join, or after a first look that lists the keys
 * ahead and then either follows the key H places ahead or counts down the
 * deletes ahead within the window.
 */
export class QueueWait {
  private cancelLater: (() => void) | undefined;
  private watcher: Watcher | undefined;
  private announced = false;
  private readonly once: WaitOnce<string>;

  constructor(
    private readonly d: QueueWaitDeps,
    private readonly n: number,
    private readonly me: Mine,
    signal: AbortSignal,
  ) {
    this.once = new WaitOnce<string>(signal, () => {
      this.cancelLater?.();
      this.stopWatch();
    });
  }

  /** Waits for a slot; `aheadAtJoin` (the keys ahead when ours was put) admits at once when below n. */
  begin(aheadAtJoin: number, setOnLost: (f: (err: Error) => void) => void): Promise<string> {
    const { n, me } = this;
    return this.once.begin(() => {
      setOnLost((err) => this.once.fail(unavailable(err, 'the slot lease was lost while waiting')));
      if (aheadAtJoin < n) {
        this.near(aheadAtJoin);
        this.once.end(me.key);
        return;
      }
      const later = firstLookMs(n, aheadAtJoin, this.d.followSpreadMs);
      if (later === 0) return this.look();
      this.cancelLater = this.d.clock.setTimer(later, () => {
        this.cancelLater = undefined;
        this.look();
      });
    });
  }

  private stopWatch(): void {
    const w = this.watcher;
    this.watcher = undefined;
    void w?.cancel().catch(() => undefined);
  }

  private near(ahead: number): void {
    if (this.announced || !isNear(this.n, ahead)) return;
    this.announced = true;
    this.d.announce(this.me).catch((err: unknown) => this.once.fail(err as SpcdError));
  }

  private watch(w: Watcher): void {
    this.watcher = w;
    w.on('error', (err) => this.once.fail(unavailable(err, 'watching the slot queue')));
    // etcd3 resumes a dropped watch from the last revision it saw: nothing is missed.
    w.on('disconnected', () => this.d.log.info('slot queue watch disconnected; resuming'));
  }

  private look(): void {
    this.stopWatch();
    if (this.once.ended) return;
    // a throw while placing or watching ends the wait too (never an unhandled rejection)
    this.d
      .listAhead(this.n, this.me)
      .then((listed) => this.placed(listed))
      .catch((err: unknown) => this.once.fail(unavailable(err, 'looking for this node in the slot queue')));
  }

  /** Where the listing puts us: admitted, following a key further ahead, or counting down the window. */
  private placed({ ahead, more, revision }: { ahead: AheadKey[]; more: boolean; revision: string }): void {
    if (this.once.ended) return;
    const p = place(this.n, ahead, more);
    const from = String(BigInt(revision) + 1n);
    if (p.kind === 'admitted') {
      this.near(ahead.length); // a follower of ours may be waiting for it
      return this.once.end(this.me.key);
    }
    if (p.kind === 'follow') return this.follow(p.key, from);
    this.countDown(p.ahead, from);
  }

  /** Lists again when the followed key announces it is near, or goes away. */
  private follow(key: string, from: string): void {
    const w = this.d.client.watch().key(key).startRevision(from).watcher();
    const moved = (): void => {
      if (this.watcher === w) this.look();
    };
    w.on('put', (kv: IKeyValue) => {
      if (decodeEntry(kv.value.toString()).near) moved();
    });
    w.on('delete', moved);
    this.watch(w);
  }

  /** Within the window: each delete of a key ahead brings us closer; our own key's delete ends the wait. */
  private countDown(ahead: ReadonlySet<string>, from: string): void {
    const { n, me } = this;
    const left = new Set(ahead);
    const w = this.d.client.watch().prefix(this.d.queuePrefix).startRevision(from).only('delete').watcher();
    w.on('delete', (kv: IKeyValue) => {
      const k = kv.key.toString();
      if (k === me.key) return this.once.fail(gone(me.key));
      if (!left.delete(k)) return;
      this.near(left.size);
      if (left.size < n) this.once.end(me.key);
    });
    this.watch(w);
    this.near(left.size);
  }
}
