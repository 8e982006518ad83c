import { toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from '../executor/ports.js';
import type { Step } from '../planner/types.js';
import { forgetAdoption, type Released } from './adoption-release.js';
import type { QuarantineRetry } from './quarantine-retry.js';
import type { IntentBook, IntentResult } from './intents.js';
import type { ContainerLedger } from './ledger.js';
import type { ContainerLocks, LockingOperation } from './locks.js';
import type { Operations } from './operations.js';
import { recordError, recordStep, stepFailed, stepLaunched } from './step-ledger.js';
import { stepContainer, type StepDeps } from './steps.js';

export interface LauncherDeps {
  readonly exec: ExecutorDeps;
  readonly log: Logger;
  /** Dates a step's or a release's error. */
  readonly clock: Clock;
  /** Written here alone (step-ledger.ts): a step's effects and outcome, a release's failure. */
  readonly ledger: ContainerLedger;
  readonly locks: ContainerLocks;
  readonly intents: IntentBook;
  /** Where a planned or heal step's operation is recorded (it publishes nothing), so `done(id)` answers for it. */
  readonly operations: Operations;
  /** Tasks running now. */
  readonly busyTasks: () => number;
  /** Asks for another pass at once (steps left for lack of room). */
  readonly requeue: () => void;
  readonly runExclusive: <T>(name: string, op: LockingOperation, fn: () => Promise<T>) => Promise<T>;
  readonly forgetHealth: (name: string) => void;
  readonly pinned: (spec: ContainerSpec) => void;
  /** The quarantine retries asked for: told when one starts, and of its outcome. */
  readonly retries: Pick<QuarantineRetry, 'started' | 'recovered'>;
}

/** Planned and heal steps running at once at most; the operator's steps never wait for it. */
const MAX_PARALLEL_TASKS = 4;

/**
 * Step 4 of a pass: each step a task that locks its container, run through the
 * executor table (steps.ts). The step's origin says under which operation:
 * the operator's step runs under its intent's operation and settles it; a
 * heal's and a planned one run under their own. It alone records a step in
 * the ledger, by the effects step-ledger.ts declares; executors read none.
 */
export class StepLauncher {
  constructor(private readonly d: LauncherDeps) {}

  launch(steps: readonly Step[]): void {
    const { ledger, intents } = this.d;
    for (const s of steps) {
      const origin = s.origin;
      const name = stepContainer(s);
      if (this.d.locks.lockedBy(name)) continue;
      if (s.kind === 'recover') {
        this.recover(s);
        continue;
      }
      if (origin.by === 'operator') {
        const settle = intents.take(name);
        stepLaunched(ledger, s);
        const op = origin.operation;
        settle?.(this.run(s, op));
        continue;
      }
      if (this.d.busyTasks() >= MAX_PARALLEL_TASKS) {
        this.d.requeue();
        continue;
      }
      const kind = origin.by === 'heal' ? 'heal' : 'reconcile';
      const op: LockingOperation = { id: this.d.operations.newId(kind), kind };
      const running = this.run(s, op);
      this.d.operations.follow({ operationId: op.id, kind, target: name, step: s.kind }, running);
      running.catch((err: unknown) => {
        const e = toSpcdError(err);
        // A heal's failure is its last error only (recordStep): it is not a failed step.
        if (!stepFailed(ledger, s, e, this.d.exec.clock.now())) return;
        this.d.log.warn({ container: name, step: s.kind, code: e.code, err: e.message }, 'step failed');
      });
    }
  }

  /**
   * The operator's release: forgets the container's adoption with the container
   * locked by operation `id` (an `adopt`); no step (decision 0059), its failure
   * shown as the container's last error as a step's is.
   */
  release(name: string, id: string): Promise<Released> {
    const { exec, ledger } = this.d;
    return this.d.runExclusive(name, { id, kind: 'adopt' }, () =>
      recordError(
        ledger,
        name,
        () => this.d.clock.now(),
        () => forgetAdoption(exec, name),
      ),
    );
  }

  /**
   * A quarantine's retry, under an operation of its own (kind `recover`):
   * the reload waits for it through the retries and names its id in its
   * result, and its `operation` events carry that id; a failure is logged, and
   * the container stays quarantined.
   */
  private recover(s: Step<'recover'>): void {
    const name = s.container;
    const op: LockingOperation =
      s.origin.by === 'operator'
        ? s.origin.operation
        : { id: this.d.operations.newId('recover'), kind: 'recover' };
    const running = this.run(s, op);
    // The reload's retry is published as the API's operations are (the reload's result names it); spcd's own is quiet.
    if (s.origin.by === 'operator') this.d.operations.track(op.id, 'recover', name, running);
    else
      this.d.operations.follow({ operationId: op.id, kind: 'recover', target: name, step: s.kind }, running);
    this.d.retries.started(name, running, op.id);
    running.catch((err: unknown) => {
      const e = toSpcdError(err);
      this.d.log.warn({ container: name, err: e.message, code: e.code }, 'quarantine retry failed');
    });
  }

  /** One step with its container locked, recorded in the ledger around it. */
  private run(s: Step, op: LockingOperation): Promise<IntentResult> {
    const record = () => recordStep(s, this.d.ledger, this.deps(op.id), () => this.d.clock.now());
    return this.d.runExclusive(stepContainer(s), op, record);
  }

  private deps(operationId: string): StepDeps {
    return {
      exec: this.d.exec,
      operationId,
      forgetHealth: this.d.forgetHealth,
      pinned: this.d.pinned,
      recovered: (name, outcome) => this.d.retries.recovered(name, outcome),
    };
  }
}
