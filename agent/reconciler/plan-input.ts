import type { Logger } from '../log.js';
import type { ObservedContainer } from '../model/observed.js';
import type { DesiredContainer, HealRequest, Intent, Plan, RuntimeFacts } from '../planner/types.js';
import type { StateStore } from '../state/store.js';
import type { ContainerLedger } from './ledger.js';
import type { ContainerLocks } from './locks.js';

/** The requests the planner is given besides the definitions: the operator's intents and the heals. */
export interface Requests {
  readonly intents: (name: string) => Intent | undefined;
  readonly heals: ReadonlyMap<string, HealRequest>;
}

/**
 * What the planner is told beyond the engine: locks, operator stops,
 * failures, backoff, failed targets, readiness (`ready`: the health room's
 * verdict, for depends_on), and the requests (intents, heals).
 */
/** Where the facts come from besides the definitions and the listing. */
export interface FactSources {
  readonly ledger: ContainerLedger;
  readonly locks: ContainerLocks;
  readonly state: Pick<StateStore, 'record'>;
  /** The health room's verdict on a container with checks: they passed since it started. */
  readonly ready: (name: string) => boolean;
}

export function runtimeFacts(
  desired: readonly DesiredContainer[],
  observed: readonly ObservedContainer[],
  { ledger, locks, state, ready }: FactSources,
  requests?: Requests,
): Map<string, RuntimeFacts> {
  const m = new Map<string, RuntimeFacts>();
  for (const d of desired) {
    const name = d.spec.name;
    const f = ledger.of(name);
    const rec = state.record(name);
    const intent = requests?.intents(name);
    const heal = requests?.heals.get(name);
    m.set(name, {
      busy: locks.lockedDuringListing(name),
      operatorStopped: rec?.heldStopped ?? false,
      failed: f.failed !== null,
      nextAttemptAt: f.backoff.nextAttemptAt,
      ...(f.change.retryAt > 0 ? { changeRetryAt: f.change.retryAt } : {}),
      ready: d.spec.healthchecks.length === 0 || ready(name),
      ...(rec?.failedTarget ? { failedTarget: rec.failedTarget } : {}),
      ...(intent ? { intent } : {}),
      ...(heal ? { heal } : {}),
    });
  }
  // A container no longer desired (being removed) that an operation has locked.
  for (const name of locks.names()) {
    if (!m.has(name) && observed.some((o) => o.identity.container === name))
      m.set(name, { busy: true, operatorStopped: false, failed: false, nextAttemptAt: 0 });
  }
  return m;
}

/** Warns once per container (and again when the reason changes) that spcd leaves it as it is. */
export class UntouchedLog {
  private logged = new Map<string, string>();

  constructor(private readonly log: Logger) {}

  note(p: Plan): void {
    const now = new Map((p.untouched ?? []).map((u) => [u.container, u.reason]));
    for (const [container, reason] of now) {
      if (this.logged.get(container) !== reason)
        this.log.warn({ container, reason }, 'container left as it is');
    }
    this.logged = now;
  }
}
