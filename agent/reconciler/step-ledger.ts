import { toSpcdError, type SpcdError } from '../errors.js';
import type { Step, StepKind } from '../planner/types.js';
import type { IntentResult } from './intents.js';
import type { ContainerLedger } from './ledger.js';
import { giveUpReason, runStep, stepContainer, type StepDeps, type StepFacts } from './steps.js';

/**
 * What one step records in the ledger, by the moment the launcher records it.
 * Every moment is with the container locked.
 */
interface Effects {
  /** Before its executor runs (a create that fails still counts as an attempt); returns what the executor reads. */
  readonly before?: (l: ContainerLedger, name: string, now: number) => StepFacts | void;
  /** When the executor reports that it reached its point (StepContext.reached), at `at`. */
  readonly reached?: (l: ContainerLedger, name: string, at: number) => void;
  /** Once it succeeded. */
  readonly succeeded?: (l: ContainerLedger, name: string) => void;
}

const NONE: Effects = {};

/** A check's stop or restart carries out the pending heal: taken before it runs. */
const takeHeal = (l: ContainerLedger, name: string): StepFacts => ({ heal: l.takeHeal(name) });

/**
 * The ledger effects of each step kind, the one place they are declared. A
 * kind added to `StepFields` (planner/types.ts) does not compile until it has
 * an entry here. What every step records whatever its kind (at launch, on
 * failure) is in `stepLaunched`, `recordStep` and `stepFailed` below.
 */
export const STEP_LEDGER: { readonly [K in StepKind]: (s: Step<K>) => Effects } = {
  create: () => ({
    before: (l, name, now) => l.created(name, now),
    succeeded: (l, name) => l.errorCleared(name),
  }),
  start: (s) =>
    s.origin.by === 'operator'
      ? // Once its stop is undone in state.json: the failure ends, a pending heal is moot.
        { reached: (l, name) => l.operatorStarted(name) }
      : { before: (l, name, now) => l.started(name, now) },
  stop: (s) =>
    s.origin.by === 'operator'
      ? NONE
      : // A check's stop: the event gives why spcd stopped trying.
        { before: (l, name) => ({ ...takeHeal(l, name), failed: l.of(name).failed }) },
  restart: (s) =>
    s.origin.by === 'operator'
      ? NONE
      : // A heal's restart counts once it passed the VM-safety guard and the census, when it stops.
        { before: takeHeal, reached: (l, name, at) => l.healing(name, at) },
  replace: () => ({ succeeded: (l, name) => l.changed(name) }),
  upgrade: () => NONE,
  adopt: () => NONE,
  remove: () => NONE,
  // Its entry resolved (before it leaves quarantine): the error no longer holds.
  recover: () => ({ reached: (l, name) => l.errorCleared(name) }),
};

function effectsOf<K extends StepKind>(s: Step<K>): Effects {
  const of: (typeof STEP_LEDGER)[K] = STEP_LEDGER[s.kind];
  return of(s);
}

/**
 * Runs fn with the container locked by its caller; a failure is shown as the
 * container's last error (until an operation on it succeeds), then thrown on.
 */
export async function recordError<T>(
  ledger: ContainerLedger,
  name: string,
  now: () => number,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    ledger.errored(name, toSpcdError(err), now());
    throw err;
  }
}

/**
 * Runs one step (its container locked by the caller) through the executor
 * table, with its ledger effects (STEP_LEDGER) around it: how the launcher
 * runs every step. `now` dates its error (the reconciler's clock).
 */
export function recordStep(
  s: Step,
  ledger: ContainerLedger,
  deps: StepDeps,
  now: () => number = () => deps.exec.clock.now(),
): Promise<IntentResult> {
  const name = stepContainer(s);
  const clock = deps.exec.clock;
  return recordError(ledger, name, now, async () => {
    const fx = effectsOf(s);
    const facts = fx.before?.(ledger, name, clock.now()) ?? {};
    const reached = (at: number) => {
      fx.reached?.(ledger, name, at);
      return ledger.of(name);
    };
    const result = await runStep(s, { ...deps, facts, reached });
    fx.succeeded?.(ledger, name);
    return result;
  });
}

/** At launch, before the lock is asked for: the operator's step stands for a heal asked for meanwhile (one restart, not two). */
export function stepLaunched(ledger: ContainerLedger, s: Step): void {
  if (s.origin.by === 'operator') ledger.takeHeal(stepContainer(s));
}

/**
 * A planned step failed (its container released): counted toward its
 * backoff, and given up when giveUpReason says so. A heal's failure is its
 * last error only; CONFLICT (it never ran), the operator's steps and a
 * quarantine's retry are not counted. True when it was counted.
 */
export function stepFailed(ledger: ContainerLedger, s: Step, e: SpcdError, now: number): boolean {
  if (e.code === 'CONFLICT' || s.origin.by !== 'plan' || s.kind === 'recover') return false;
  ledger.stepFailed(stepContainer(s), e, now, giveUpReason(s, e), s.kind === 'replace');
  return true;
}
