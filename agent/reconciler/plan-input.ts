import type { Logger } from '../log.js';
import type { ObservedContainer } from '../model/observed.js';
import type { DesiredContainer, Plan, RuntimeFacts, Step } from '../planner/types.js';
import type { StateStore } from '../state/store.js';
import type { ContainerLedger } from './ledger.js';
import type { ContainerLocks } from './locks.js';
import { stepContainer } from './steps.js';

/** What the planner is told beyond the engine: locks, operator stops, failures, backoff, failed targets. */
export function runtimeFacts(
  desired: readonly DesiredContainer[],
  observed: readonly ObservedContainer[],
  ledger: ContainerLedger,
  locks: ContainerLocks,
  state: Pick<StateStore, 'record'>,
): Map<string, RuntimeFacts> {
  const m = new Map<string, RuntimeFacts>();
  for (const d of desired) {
    const name = d.spec.name;
    const f = ledger.of(name);
    const rec = state.record(name);
    m.set(name, {
      busy: locks.heldDuringListing(name),
      heldStopped: rec?.heldStopped ?? false,
      failed: f.failed !== null,
      nextAttemptAt: f.backoff.nextAttemptAt,
      ...(rec?.failedTarget ? { failedTarget: rec.failedTarget } : {}),
    });
  }
  // A container no longer desired (being removed) that an operation holds.
  for (const name of locks.names()) {
    if (!m.has(name) && observed.some((o) => o.identity.container === name))
      m.set(name, { busy: true, heldStopped: false, failed: false, nextAttemptAt: 0 });
  }
  return m;
}

/** Keeps the steps `allowed` accepts; the others wait, for `reason`. */
export function restrict(p: Plan, allowed: (s: Step) => boolean, reason: string): Plan {
  return {
    ...p,
    steps: p.steps.filter(allowed),
    waiting: [
      ...p.waiting,
      ...p.steps.filter((s) => !allowed(s)).map((s) => ({ container: stepContainer(s), reason })),
    ],
  };
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
