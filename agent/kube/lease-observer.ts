/**
 * When a slot Lease's holder stops counting, judged on the observing node's
 * own clock, as client-go's leader election judges it: the holder is expired
 * once its Lease record (holder, renewTime, acquireTime, duration,
 * transitions) has not changed for the lease duration, as measured by the
 * node that watches it. renewTime is only compared for change, never read as
 * a time: a renewTime in the future (a forged or skewed clock) holds a slot
 * for one lease duration after it was seen, not for ever. The duration is
 * the shorter of the Lease's own and this node's setting, so a Lease cannot
 * grant itself a longer life either. Queue annotations are not part of the
 * record: waiters joining do not renew the holder.
 */
import type { V1Lease } from '@kubernetes/client-node';
import type { Clock } from '../model/clock.js';
import { fromMicroTime } from './lease-time.js';

interface Observed {
  readonly record: string;
  readonly seenAt: number;
}

export class LeaseObserver {
  private readonly seen = new Map<string, Observed>();

  constructor(
    private readonly clock: Clock,
    private readonly maxDurationSeconds: number,
  ) {}

  /** By this node's clock, when `lease`'s holder stops counting; undefined when it has none. */
  expiresAt(lease: V1Lease): number | undefined {
    const name = lease.metadata?.name;
    const spec = lease.spec;
    if (!name || !spec?.holderIdentity) return undefined;
    const record = JSON.stringify([
      spec.holderIdentity,
      fromMicroTime(spec.renewTime) ?? null,
      fromMicroTime(spec.acquireTime) ?? null,
      spec.leaseDurationSeconds ?? null,
      spec.leaseTransitions ?? null,
    ]);
    let o = this.seen.get(name);
    if (o?.record !== record) {
      o = { record, seenAt: this.clock.now() };
      this.seen.set(name, o);
    }
    const own = spec.leaseDurationSeconds;
    const dur =
      own !== undefined && own > 0 ? Math.min(own, this.maxDurationSeconds) : this.maxDurationSeconds;
    return o.seenAt + dur * 1000;
  }
}
