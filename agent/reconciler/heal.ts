import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { HealthAction } from '../health/types.js';
import type { DesiredContainer, HealRequest } from '../planner/types.js';
import type { ContainerLedger } from './ledger.js';

export interface HealDeps {
  readonly ledger: ContainerLedger;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly primary: (name: string) => ObservedContainer | undefined;
  /** An operation has it locked now, or an intent waits for it. */
  readonly locked: (name: string) => boolean;
  /** Locked now, or released after the current listing began. */
  readonly lockedDuringListing: (name: string) => boolean;
  readonly quarantined: (name: string) => boolean;
}

/**
 * What a failing health check asks for: a restart within the container's
 * backoff, or (action stop) a stop that leaves it failed for an operator.
 * Noted in the ledger and given to the planner, which plans the step.
 */
export class Heals {
  constructor(private readonly d: HealDeps) {}

  /** A check's action: noted in the ledger (once until carried out) and published. True when it was noted. */
  noteAction(a: HealthAction): boolean {
    const { ledger } = this.d;
    if (ledger.of(a.name).pendingHeal || this.d.locked(a.name) || this.d.quarantined(a.name)) return false;
    const now = this.d.clock.now();
    ledger.unhealthy(
      a.name,
      a.action,
      `check ${a.check} failed: ${a.reason}`,
      `check ${a.check} failed ${a.consecutiveFailures} times: ${a.reason}`,
      now,
    );
    this.d.events.publish({
      type: 'health',
      at: now,
      container: a.name,
      check: a.check,
      status: 'unhealthy',
      output: a.lastOutputs[a.lastOutputs.length - 1] ?? '',
    });
    return true;
  }

  /**
   * The heals the planner is given: a container that asked and runs (one that
   * no longer runs forgets its heal); none while an operation has it locked.
   */
  requests(desired: readonly DesiredContainer[]): Map<string, HealRequest> {
    const out = new Map<string, HealRequest>();
    for (const d of desired) {
      const name = d.spec.name;
      const pending = this.d.ledger.of(name).pendingHeal;
      if (!pending || this.d.lockedDuringListing(name)) continue;
      const p = this.d.primary(name);
      if (p && isRunning(p)) out.set(name, pending);
      else this.d.ledger.takeHeal(name);
    }
    return out;
  }
}
