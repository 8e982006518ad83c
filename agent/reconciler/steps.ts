import { SpcdError } from '../errors.js';
import { specHash } from '../model/hash.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { censusAfter, censusBefore } from '../executor/census.js';
import { guardHypervisorStop } from '../executor/guard.js';
import {
  createContainer,
  removeContainer,
  restartContainer,
  resumeContainer,
  startContainer,
  stopContainer,
} from '../executor/simple.js';
import { upgradeContainer } from '../executor/upgrade.js';
import { adoptContainer } from '../executor/adopt.js';
import { retryQuarantined, type QuarantinedEntry } from '../executor/recover.js';
import type { Step, StepKind } from '../planner/types.js';
import type { LedgerEntry } from './ledger.js';
import type { IntentResult } from './intents.js';

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

const present = (s: { observed: ObservedContainer | undefined; desired: { spec: ContainerSpec } }) => {
  if (!s.observed)
    throw new SpcdError('NOT_FOUND', `${s.desired.spec.name} has no container yet`, {
      container: s.desired.spec.name,
    });
  return s.observed;
};

export const EXECUTORS: Executors = {
  async create(s, { exec, operationId }) {
    await createContainer(exec, s.desired, operationId);
  },

  async start(s, { exec, reached }) {
    const name = s.desired.spec.name;
    if (s.origin.by === 'operator') {
      // The operator's start ends the operator's stop and the failure, whatever runs.
      await exec.state.setOperatorStopped(name, false);
      reached(exec.clock.now());
      if (s.observed) await resumeContainer(exec, s.observed);
      return { generation: s.observed?.identity.generation ?? 0 };
    }
    await startContainer(exec, present(s), s.reason);
  },

  async stop(s, { exec, facts }) {
    const name = s.desired.spec.name;
    const p = s.observed;
    if (s.origin.by === 'operator') {
      await guardHypervisorStop(exec, s.desired.spec, p);
      await exec.state.setOperatorStopped(name, true);
      if (p && isRunning(p)) await stopContainer(exec, p, s.desired.spec.stopGraceMs);
      return { generation: p?.identity.generation ?? 0 };
    }
    // A check's action stop: stop it and leave it failed for an operator (no VM-safety guard, decision 0056).
    const { stoppedAt: at } = await stopContainer(exec, present(s), s.desired.spec.stopGraceMs);
    const reason = facts.failed ?? s.reason;
    exec.events.publish({ type: 'state', at, container: name, from: 'running', to: 'failed', reason });
  },

  async restart(s, ctx) {
    if (s.origin.by === 'operator') return operatorRestart(s.desired.spec, s.observed, ctx);
    await healRestart(s.desired.spec, present(s), ctx, s.reason);
  },

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

/** The operator's restart: the VM-safety guard, the census around it, no probing meanwhile. */
async function operatorRestart(
  spec: ContainerSpec,
  observed: ObservedContainer | undefined,
  { exec, operationId }: StepContext,
): Promise<IntentResult> {
  const name = spec.name;
  await guardHypervisorStop(exec, spec, observed);
  const p = present({ observed, desired: { spec } });
  const running = exec.state.generation(name, p.identity.generation)?.spec.census;
  const census = isRunning(p) ? await censusBefore(exec, running ?? spec.census, p.id) : undefined;
  exec.health.pause(name);
  let window: { stoppedAt: number; windowMs: number };
  try {
    window = await restartContainer(exec, p, spec.stopGraceMs);
  } finally {
    exec.health.resume(name);
  }
  const ctx = { operationId, container: name, action: 'restart', containerId: p.id };
  await censusAfter(exec, census, spec.census, ctx);
  // stoppedAt: the census after the start makes the operation end later than the window.
  return {
    generation: p.identity.generation,
    windowMs: window.windowMs,
    stoppedAt: new Date(window.stoppedAt).toISOString(),
  };
}

/**
 * A heal's restart. A running hypervisor is stopped by it as by the
 * operator's restart (decision 0056): the VM-safety guard first (a refusal
 * takes the heal and counts no restart), and the domain census around it.
 * One that no longer runs has nothing to stop: no guard, no census.
 */
async function healRestart(
  spec: ContainerSpec,
  p: ObservedContainer,
  { exec, facts, reached, operationId, forgetHealth }: StepContext,
  planned: string,
): Promise<void> {
  const name = spec.name;
  const reason = facts.heal ?? planned;
  const running = isRunning(p);
  if (running) await guardHypervisorStop(exec, spec, p);
  const recorded = exec.state.generation(name, p.identity.generation)?.spec.census;
  const census = running ? await censusBefore(exec, recorded ?? spec.census, p.id) : undefined;
  const now = exec.clock.now();
  const after = reached(now);
  // No probing while spcd stops and starts it; the next pass watches the new start afresh.
  forgetHealth(name);
  exec.log.warn(
    { container: name, reason, failures: after.backoff.failures, restartCount: after.restartCount },
    'restarting unhealthy container',
  );
  exec.events.publish({ type: 'state', at: now, container: name, from: 'running', to: 'restarting', reason });
  await restartContainer(exec, p, spec.stopGraceMs);
  await censusAfter(exec, census, spec.census, {
    operationId,
    container: name,
    action: 'restart',
    containerId: p.id,
  });
}

/**
 * Why spcd stops trying after this failed step, or null when it retries with
 * backoff: a refused removal is retried (the VMs may be migrated); a refused
 * change or a failed bootstrap needs an operator.
 */
export function giveUpReason(s: Step, e: SpcdError): string | null {
  if (s.kind === 'remove') return null;
  return e.code === 'BOOTSTRAP_FAILED' || e.code === 'VM_SAFETY_REFUSED' ? e.message : null;
}
