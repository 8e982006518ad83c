import type { SpcdError } from '../errors.js';
import { specHash } from '../model/hash.js';
import type { ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { createContainer, removeContainer } from '../executor/simple.js';
import { upgradeContainer } from '../executor/upgrade.js';
import { adoptContainer } from '../executor/adopt.js';
import { retryQuarantined, type QuarantinedEntry } from '../executor/recover.js';
import type { Step, StepKind } from '../planner/types.js';
import type { LedgerEntry } from './ledger.js';
import type { IntentResult } from './intents.js';
import { byOrigin, RESTART, START, STOP } from './origin-executors.js';

export { stepContainer } from '../planner/plan.js';

/** What the launcher gives every step besides the ledger's facts (step-ledger.ts). */
export interface StepDeps {
  readonly exec: ExecutorDeps;
  /** The operation the step runs under (the operator's, a heal's, or the pass's). */
  readonly operationId: string;
  /** A heal's restart: the next pass watches the new start afresh. */
  readonly forgetHealth: (name: string) => void;
  /** The operator's change succeeded: the reconciler desires its (pinned) spec from now on. */
  readonly pinned: (spec: ContainerSpec) => void;
  /** A quarantine's retry ended: 'cleared' (it leaves quarantine) or the entry as it stands now. */
  readonly recovered: (name: string, outcome: 'cleared' | QuarantinedEntry) => Promise<void>;
}

/**
 * What an executor is given: no ledger. The launcher records the step in it
 * (step-ledger.ts) and hands the executor what it read there as data.
 */
export interface StepContext extends StepDeps {
  /** Taken or read from the ledger before the step ran. */
  readonly facts: StepFacts;
  /**
   * The step reached the point from which its record holds (the operator's
   * start written; a heal's restart past its guard and census, stopping at
   * `at`; a quarantine's entry resolved): the launcher records it, and
   * answers with the entry as it stands.
   */
  readonly reached: (at: number) => Pick<LedgerEntry, 'restartCount' | 'backoff'>;
}

/** The ledger's facts an executor needs. */
export interface StepFacts {
  /** The pending heal's reason, taken for this step. */
  readonly heal?: string | undefined;
  /** Why spcd stopped trying, when it did. */
  readonly failed?: string | null;
}

/**
 * One executor per step kind. A kind added to `StepFields` (planner/types.ts)
 * does not compile until it has an entry here.
 */
export type Executors = {
  readonly [K in StepKind]: (s: Step<K>, ctx: StepContext) => Promise<IntentResult>;
};

/** Carries out one step (its container locked by the caller) through the table. */
export function runStep<K extends StepKind>(s: Step<K>, ctx: StepContext): Promise<IntentResult> {
  const run: Executors[K] = EXECUTORS[s.kind];
  return run(s, ctx);
}

export const EXECUTORS: Executors = {
  async create(s, { exec, operationId }) {
    await createContainer(exec, s.desired, operationId);
  },

  // Who asked decides what these do (origin-executors.ts).
  start: byOrigin(START),
  stop: byOrigin(STOP),
  restart: byOrigin(RESTART),

  async replace(s, { exec, operationId }) {
    await upgradeContainer(exec, {
      operationId,
      kind: 'recreate',
      spec: s.desired.spec,
      specHash: s.desired.specHash,
      current: s.observed,
      pull: 'missing',
      reason: s.reason,
    });
  },

  async upgrade(s, { exec, operationId, pinned }) {
    const { intent } = s;
    const spec = intent.spec;
    const result = await upgradeContainer(exec, {
      operationId,
      kind: intent.change,
      spec,
      specHash: specHash(spec),
      current: s.observed,
      pull: intent.pull,
      ...(intent.expectDigest ? { expectDigest: intent.expectDigest } : {}),
      ...(intent.from !== undefined ? { from: intent.from } : {}),
      force: intent.force,
      reason: s.reason,
      // Pinned at the commit so that the definitions do not undo it (until they change on disk).
      pin: specHash(spec) === intent.definitionHash ? 'clear' : { definitionHash: intent.definitionHash },
    });
    pinned(spec);
    return { ...result };
  },

  async adopt(s, { exec, operationId }) {
    const record = await adoptContainer(exec, s, operationId);
    return { generation: record.generation };
  },

  async remove(s, { exec }) {
    await removeContainer(exec, s.observed, s.reason, s.definitionDeleted);
  },

  async recover(s, { exec, recovered, reached }) {
    const outcome = await retryQuarantined(exec, s.container);
    if (outcome === 'cleared') reached(exec.clock.now());
    await recovered(s.container, outcome);
    return { quarantined: outcome !== 'cleared' };
  },
};

/**
 * Why spcd stops trying after this failed step, or null when it retries with
 * backoff: a refused removal is retried (the VMs may be migrated); a refused
 * heal, a failed bootstrap or the create of a definition the engine cannot
 * run needs an operator. A failed replacement is no give-up: the old
 * instance runs on, supervised; a refused hypervisor downgrade is tried again
 * after its backoff (the VMs may be migrated), and a target the engine cannot
 * run is remembered as failed until the definition changes.
 */
export function giveUpReason(s: Step, e: SpcdError): string | null {
  if (s.kind === 'remove' || s.kind === 'replace') return null;
  if (e.code === 'ENGINE_UNSUPPORTED') return s.kind === 'create' ? e.message : null;
  return e.code === 'BOOTSTRAP_FAILED' || e.code === 'VM_SAFETY_REFUSED' ? e.message : null;
}
