/**
 * The executors of the step kinds whose work depends on who asked for them
 * (decision 0071): a start, a stop and a restart each have one function per
 * origin their kind allows (planner/types.ts `StepFields`), chosen by the
 * step's `origin.by` through `byOrigin`. An origin added to a kind does not
 * compile until its table here has a function for it.
 */
import { SpcdError } from '../errors.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import { censusAfter, censusBefore } from '../executor/census.js';
import { guardHypervisorStop } from '../executor/guard.js';
import { restartContainer, resumeContainer, startContainer, stopContainer } from '../executor/simple.js';
import type { Step, StepKind } from '../planner/types.js';
import type { IntentResult } from './intents.js';
import type { StepContext } from './steps.js';

type Origin<K extends StepKind> = Step<K>['origin']['by'];
type StepBy<K extends StepKind, O extends Origin<K>> = Step<K> & {
  readonly origin: Extract<Step<K>['origin'], { by: O }>;
};

/** One executor per origin the kind allows. */
export type ByOrigin<K extends StepKind> = {
  readonly [O in Origin<K>]: (s: StepBy<K, O>, ctx: StepContext) => Promise<IntentResult>;
};

/** The kind's executor: the function of the step's origin. */
export function byOrigin<K extends StepKind>(
  table: ByOrigin<K>,
): (s: Step<K>, ctx: StepContext) => Promise<IntentResult> {
  return (s, ctx) => {
    const run = table[s.origin.by as Origin<K>] as (s: Step<K>, ctx: StepContext) => Promise<IntentResult>;
    return run(s, ctx);
  };
}

const present = (s: { observed: ObservedContainer | undefined; desired: { spec: ContainerSpec } }) => {
  if (!s.observed)
    throw new SpcdError('NOT_FOUND', `${s.desired.spec.name} has no container yet`, {
      container: s.desired.spec.name,
    });
  return s.observed;
};

export const START: ByOrigin<'start'> = {
  /** The operator's start ends the operator's stop and the failure, whatever runs. */
  async operator(s, { exec, reached }) {
    await exec.state.setOperatorStopped(s.desired.spec.name, false);
    reached(exec.clock.now());
    if (s.observed) await resumeContainer(exec, s.observed);
    return { generation: s.observed?.identity.generation ?? 0 };
  },
  /** The plan's start of a container that exited. */
  async plan(s, { exec }) {
    await startContainer(exec, present(s), s.reason);
  },
};

export const STOP: ByOrigin<'stop'> = {
  /** Stopped by the operator until their start: the VM-safety guard first. */
  async operator(s, { exec }) {
    const p = s.observed;
    await guardHypervisorStop(exec, s.desired.spec, p);
    await exec.state.setOperatorStopped(s.desired.spec.name, true);
    if (p && isRunning(p)) await stopContainer(exec, p, s.desired.spec.stopGraceMs);
    return { generation: p?.identity.generation ?? 0 };
  },
  /** A check's action stop: stopped and left failed for an operator (no VM-safety guard, decision 0056). */
  async heal(s, { exec, facts }) {
    const { stoppedAt: at } = await stopContainer(exec, present(s), s.desired.spec.stopGraceMs);
    const reason = facts.failed ?? s.reason;
    const container = s.desired.spec.name;
    exec.events.publish({ type: 'state', at, container, from: 'running', to: 'failed', reason });
  },
};

export const RESTART: ByOrigin<'restart'> = {
  operator: (s, ctx) => operatorRestart(s.desired.spec, s.observed, ctx),
  heal: (s, ctx) => healRestart(s.desired.spec, present(s), ctx, s.reason),
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
