/**
 * EtcdSession: the one lease a node keeps while it takes part in fleet
 * rollouts, as etcd's own concurrency package keeps one per client. Its slot
 * queue key (slots.ts) is bound to it: a node that dies stops renewing, and
 * etcd deletes the key when the lease lapses. Granted once and renewed every
 * third of its TTL, so taking a slot costs no grant and leaving one no
 * revoke (its key is deleted instead); when the lease is lost (etcd
 * unreachable past the TTL, or it lapsed) the next take grants a new one.
 */
import type { Etcd3, Lease } from 'etcd3';
import type { Logger } from '../log.js';
import { unavailable } from './client.js';

export interface SessionLease {
  /** The lease id, as etcd names it (decimal). */
  readonly id: string;
  /** Whether the lease was lost (no key bound to it lives on). */
  readonly lost: boolean;
  /** Calls f once if the lease is lost; returns a function that stops listening. */
  onLost(f: (err: Error) => void): () => void;
}

interface Live extends SessionLease {
  readonly lease: Lease;
  id: string;
  lost: boolean;
  readonly listeners: Set<(err: Error) => void>;
}

export class EtcdSession {
  private live: Promise<Live> | undefined;
  /** What `live` resolved to, while it is still the session's lease. */
  private granted: Live | undefined;
  private closed = false;

  constructor(
    private readonly d: { readonly client: Etcd3; readonly ttlSeconds: number; readonly log: Logger },
  ) {}

  /** The live lease, granting a new one when there is none (or it was lost). */
  lease(): Promise<SessionLease> {
    if (this.closed)
      return Promise.reject(unavailable(new Error('the session is closed'), 'granting the slot lease'));
    this.live ??= this.grant();
    return this.live;
  }

  /** Grants the lease now (a node about to queue then does not wait for it); a failure is retried at the next lease(). */
  warm(): void {
    this.lease().catch((err: unknown) =>
      this.d.log.info(
        { err: (err as Error).message },
        'etcd slot lease not granted yet; granted when a slot is wanted',
      ),
    );
  }

  /**
   * Stops renewing the lease without revoking it: what is bound to it goes
   * when it lapses (a key that could not be deleted). The next lease() grants
   * a new one.
   */
  abandon(s: SessionLease): void {
    const l = this.granted;
    if (!l || l !== s) return; // lost already, or replaced: nothing renews it
    this.granted = undefined;
    this.live = undefined;
    l.lease.release();
  }

  /** Revokes the lease (shutdown); when etcd does not answer, it lapses after its TTL. */
  async close(): Promise<void> {
    this.closed = true;
    const live = await this.live?.catch(() => undefined);
    this.live = undefined;
    this.granted = undefined;
    if (!live || live.lost) return;
    await live.lease.revoke().catch(() => live.lease.release());
  }

  private grant(): Promise<Live> {
    const lease = this.d.client.lease(this.d.ttlSeconds, { autoKeepAlive: true });
    const listeners = new Set<(err: Error) => void>();
    const live: Live = {
      lease,
      id: '',
      lost: false,
      listeners,
      onLost: (f) => {
        listeners.add(f);
        return () => listeners.delete(f);
      },
    };
    const p: Promise<Live> = lease.grant().then(
      (id) => {
        live.id = id;
        if (this.live === p && !live.lost) this.granted = live;
        return live;
      },
      (err: unknown) => {
        if (this.live === p) this.live = undefined;
        lease.release();
        throw unavailable(err, 'granting the slot lease');
      },
    );
    lease.on('lost', (err) => {
      live.lost = true;
      if (this.live === p) this.live = undefined;
      if (this.granted === live) this.granted = undefined;
      for (const f of [...listeners]) f(err);
      listeners.clear();
    });
    return p;
  }
}
