import { randomUUID } from 'node:crypto';
import { toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { ContainerEngine } from '../engine/types.js';
import type { HealthAction } from '../health/types.js';
import type { DesiredContainer } from '../planner/types.js';
import type { ContainerLedger } from './ledger.js';
import type { HealthSync } from './health-sync.js';
import type { HeldOperation } from './locks.js';

export interface HealDeps {
  readonly engine: Pick<ContainerEngine, 'stop' | 'start'>;
  readonly ledger: ContainerLedger;
  readonly healthSync: HealthSync;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly primary: (name: string) => ObservedContainer | undefined;
  /** An operation holds it now. */
  readonly held: (name: string) => boolean;
  /** Held now, or released after the current listing began. */
  readonly heldDuringListing: (name: string) => boolean;
  readonly quarantined: (name: string) => boolean;
  readonly runExclusive: <T>(name: string, op: HeldOperation, fn: () => Promise<T>) => Promise<T>;
}

const healOp = (): HeldOperation => ({ id: `heal-${randomUUID().slice(0, 8)}`, kind: 'heal' });

/**
 * What a failing health check asks for: a restart within the container's
 * backoff, or (action stop) a stop that leaves it failed for an operator.
 */
export class Heals {
  constructor(private readonly d: HealDeps) {}

  /** A check's action: noted in the ledger (once until carried out) and published. True when it was noted. */
  noteAction(a: HealthAction): boolean {
    const { ledger } = this.d;
    if (ledger.of(a.name).pendingHeal || this.d.held(a.name) || this.d.quarantined(a.name)) return false;
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

  /** Heals every container that asked; returns the earliest time a heal waits for its backoff. */
  launchAll(desired: readonly DesiredContainer[], now: number): number | undefined {
    let wakeAt: number | undefined;
    for (const d of desired) {
      const at = this.launch(d, now);
      if (at !== undefined) wakeAt = Math.min(wakeAt ?? Infinity, at);
    }
    return wakeAt;
  }

  /** Heals one container if it asked and its backoff allows; else returns when it may. */
  launch(d: DesiredContainer, now: number): number | undefined {
    const name = d.spec.name;
    const { ledger } = this.d;
    const entry = ledger.of(name);
    if (!entry.pendingHeal || this.d.heldDuringListing(name)) return undefined;
    const p = this.d.primary(name);
    if (!p || !isRunning(p)) {
      ledger.takeHeal(name);
      return undefined;
    }
    if (entry.failed) {
      this.stopFailed(d, p, entry.failed, now);
      return undefined;
    }
    if (entry.backoff.nextAttemptAt > now) return entry.backoff.nextAttemptAt;
    const reason = ledger.takeHeal(name) ?? '';
    const after = ledger.healing(name, now);
    // No probing while spcd stops and starts it; the next pass watches the new start afresh.
    this.d.healthSync.forget(name);
    this.d.log.warn(
      { container: name, reason, failures: after.backoff.failures, restartCount: after.restartCount },
      'restarting unhealthy container',
    );
    this.d
      .runExclusive(name, healOp(), async () => {
        this.d.events.publish({
          type: 'state',
          at: now,
          container: name,
          from: 'running',
          to: 'restarting',
          reason,
        });
        await this.d.engine.stop(p.id, d.spec.stopGraceMs);
        await this.d.engine.start(p.id);
      })
      .catch((err: unknown) => ledger.errored(name, toSpcdError(err), this.d.clock.now()));
    return undefined;
  }

  /** Action stop: stop it and leave it for an operator. */
  private stopFailed(d: DesiredContainer, p: ObservedContainer, reason: string, now: number): void {
    const name = d.spec.name;
    this.d.ledger.takeHeal(name);
    this.d
      .runExclusive(name, healOp(), async () => {
        await this.d.engine.stop(p.id, d.spec.stopGraceMs);
        this.d.events.publish({
          type: 'state',
          at: now,
          container: name,
          from: 'running',
          to: 'failed',
          reason,
        });
      })
      .catch(() => undefined);
  }
}
