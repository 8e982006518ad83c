/**
 * EventRecorder: core/v1 Events about this Node (involvedObject = the Node),
 * in spcd's namespace. Identical events (same type, reason, message) within
 * the aggregation window become one Event whose count goes up (a merge patch),
 * like client-go's event correlator; a token bucket caps how many API writes
 * a storm can cause, and what it drops is counted, not lost silently.
 */
import type { CoreV1Event } from '@kubernetes/client-node';
import { isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { SpcdEvent } from '../model/events.js';
import type { KubeApi } from './client.js';

export type KubeEventReason =
  | 'UpgradeStarted'
  | 'UpgradeSucceeded'
  | 'UpgradeFailed'
  | 'RolledBack'
  | 'RollbackFailed'
  | 'UnhealthyRestart'
  | 'Refused'
  | 'DependencyDown'
  | 'DependencyUp'
  | 'FleetSlotAcquired';

export interface KubeEventInput {
  readonly type: 'Normal' | 'Warning';
  readonly reason: KubeEventReason;
  readonly message: string;
}

export interface EventRecorderDeps {
  readonly api: KubeApi;
  readonly nodeName: string;
  /** Namespace the Events are written to (spcd's own; the Role grants it). */
  readonly namespace: string;
  readonly clock: Clock;
  readonly log: Logger;
}

export interface EventRecorderOptions {
  /** Repeats within this window raise count on one Event. Default 10 min. */
  readonly aggregateWindowMs?: number;
  /** Token bucket: burst and refill interval. Defaults 25 and one per 10 s. */
  readonly burst?: number;
  readonly refillMs?: number;
  /** The component name on the Event's source. */
  readonly component?: string;
}

interface Seen {
  name: string;
  count: number;
  firstAt: number;
  lastAt: number;
}

const MAX_MESSAGE = 1024;

/** Maps the daemon's bus events to Kubernetes Events; undefined for what is not worth one. */
export function kubeEventFor(e: SpcdEvent): KubeEventInput | undefined {
  if (e.type === 'operation') {
    const target = e.target;
    if (e.kind === 'upgrade' || e.kind === 'upgrade-set') {
      if (e.phase === 'running')
        return { type: 'Normal', reason: 'UpgradeStarted', message: `upgrading ${target}` };
      if (e.phase === 'succeeded')
        return { type: 'Normal', reason: 'UpgradeSucceeded', message: `upgraded ${target}` };
      if (e.phase === 'failed') {
        const code = e.error?.code;
        if (code === 'VM_SAFETY_REFUSED' || code === 'CONFLICT' || code === 'GENERATION_MISMATCH')
          return { type: 'Warning', reason: 'Refused', message: `${target}: ${e.error?.message ?? code}` };
        if (code === 'ROLLBACK_FAILED')
          return {
            type: 'Warning',
            reason: 'RollbackFailed',
            message: `${target}: ${e.error?.message ?? code}`,
          };
        return {
          type: 'Warning',
          reason: 'UpgradeFailed',
          message: `${target}: ${e.error?.message ?? 'failed'} (rolled back)`,
        };
      }
    }
    if (e.kind === 'rollback' && e.phase === 'succeeded')
      return { type: 'Normal', reason: 'RolledBack', message: `rolled back ${target}` };
    if (e.phase === 'failed' && e.error?.code === 'VM_SAFETY_REFUSED')
      return { type: 'Warning', reason: 'Refused', message: `${target}: ${e.error.message}` };
    return undefined;
  }
  if (e.type === 'dependency')
    return {
      type: e.status === 'down' ? 'Warning' : 'Normal',
      reason: e.status === 'down' ? 'DependencyDown' : 'DependencyUp',
      message: `${e.container}: ${e.dependency} ${e.status} (check ${e.check}; not restarted for it)`,
    };
  if (e.type === 'state' && (e.to === 'exited' || e.to === 'crash-looping') && e.reason)
    return { type: 'Warning', reason: 'UnhealthyRestart', message: `${e.container}: ${e.reason}` };
  return undefined;
}

export class EventRecorder {
  private readonly window: number;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly component: string;
  private tokens: number;
  private lastRefill: number;
  private readonly seen = new Map<string, Seen>();
  private chain: Promise<void> = Promise.resolve();
  /** Writes the token bucket refused. */
  dropped = 0;

  constructor(
    private readonly deps: EventRecorderDeps,
    opts: EventRecorderOptions = {},
  ) {
    this.window = opts.aggregateWindowMs ?? 10 * 60_000;
    this.burst = opts.burst ?? 25;
    this.refillMs = opts.refillMs ?? 10_000;
    this.component = opts.component ?? 'spcd';
    this.tokens = this.burst;
    this.lastRefill = deps.clock.now();
  }

  /** Queues one event; writes are serialized and never throw to the caller. */
  record(ev: KubeEventInput): Promise<void> {
    this.chain = this.chain.then(() => this.write(ev));
    return this.chain;
  }

  /** Resolves when queued writes are done. */
  flush(): Promise<void> {
    return this.chain;
  }

  private take(now: number): boolean {
    const refill = Math.floor((now - this.lastRefill) / this.refillMs);
    if (refill > 0) {
      this.tokens = Math.min(this.burst, this.tokens + refill);
      this.lastRefill += refill * this.refillMs;
    }
    if (this.tokens <= 0) return false;
    this.tokens--;
    return true;
  }

  private async write(ev: KubeEventInput): Promise<void> {
    const { api, namespace, nodeName, clock, log } = this.deps;
    const now = clock.now();
    const message =
      ev.message.length > MAX_MESSAGE ? ev.message.slice(0, MAX_MESSAGE - 3) + '...' : ev.message;
    const key = `${ev.type}\u0000${ev.reason}\u0000${message}`;
    for (const [k, s] of this.seen) if (now - s.lastAt > this.window) this.seen.delete(k);
    const prev = this.seen.get(key);
    if (!this.take(now)) {
      this.dropped++;
      if (prev) prev.count++; // the next write that gets through carries it
      log.debug({ reason: ev.reason }, 'kube event rate-limited');
      return;
    }
    const at = new Date(Math.floor(now / 1000) * 1000); // metav1.Time has whole seconds
    try {
      if (prev) {
        prev.count++;
        prev.lastAt = now;
        await api.patchEvent(namespace, prev.name, {
          count: prev.count,
          lastTimestamp: at.toISOString().replace('.000Z', 'Z'),
        });
        return;
      }
      const name = `${nodeName}.${(now * 1_000_000 + this.seen.size).toString(16)}`;
      const body: CoreV1Event = {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name, namespace },
        involvedObject: { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeName },
        type: ev.type,
        reason: ev.reason,
        message,
        count: 1,
        firstTimestamp: at,
        lastTimestamp: at,
        source: { component: this.component, host: nodeName },
        reportingComponent: `${this.component}.openstack.org`,
        reportingInstance: nodeName,
      };
      await api.createEvent(namespace, body);
      this.seen.set(key, { name, count: 1, firstAt: now, lastAt: now });
    } catch (err) {
      if (prev && isSpcdError(err, 'NOT_FOUND')) this.seen.delete(key); // expired server-side: next one creates
      log.warn(
        { code: isSpcdError(err) ? err.code : 'INTERNAL', reason: ev.reason },
        'kube event not written',
      );
    }
  }
}
