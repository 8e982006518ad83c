/**
 * The rollout's decisions, pure: may this node start now? is the canary done?
 * is the failure budget spent? is a window open? Everything they need is an
 * argument (the rollout object, the ledger, the time), so the same answers
 * hold over any backend (Kubernetes Leases today, etcd later).
 */
import type { RolloutSpec } from './spec.js';
import { windowState } from './windows.js';

/** What a node reports of itself for one rollout. */
export type Phase =
  | 'pulling'
  | 'pull-failed'
  | 'paused'
  | 'held'
  | 'queued'
  | 'upgrading'
  | 'soaking'
  | 'done'
  | 'failed'
  | 'rolled-back';

export const PHASES: readonly Phase[] = [
  'pulling',
  'pull-failed',
  'paused',
  'held',
  'queued',
  'upgrading',
  'soaking',
  'done',
  'failed',
  'rolled-back',
];

export type HoldReason = 'paused' | 'window-closed' | 'canary-running' | 'canary-failed' | 'budget-exhausted';

export interface PhaseReport {
  readonly node: string;
  readonly rollout: string;
  readonly phase: Phase;
  /** Why a node is held, or what failed. */
  readonly reason?: string;
  readonly message?: string;
  /** Epoch ms when this phase began (the node's clock). */
  readonly since: number;
  readonly canary?: boolean;
  /** The hash of the target (images and globals) the node worked on. */
  readonly target?: string;
}

export type CanaryState = 'upgrading' | 'soaking' | 'passed' | 'failed';

/**
 * The facts every node must agree on, written only by compare-and-swap: who
 * the canaries are and how they did, and who failed. Small by construction
 * (at most C canaries; failures stop the fleet after the budget).
 */
export interface Ledger {
  readonly rollout: string;
  readonly canaries: Readonly<Record<string, CanaryState>>;
  readonly failed: readonly string[];
}

export function emptyLedger(rollout: string): Ledger {
  return { rollout, canaries: {}, failed: [] };
}

/** The ledger of this rollout: one left by an older rollout counts as empty. */
export function ledgerFor(rollout: string, l: Ledger | undefined): Ledger {
  return l && l.rollout === rollout ? l : emptyLedger(rollout);
}

export type Gate =
  | { readonly kind: 'start'; readonly canary: boolean }
  | {
      readonly kind: 'hold';
      readonly phase: 'paused' | 'held';
      readonly reason: HoldReason;
      /** When the answer may change without any other news (a window opening). */
      readonly recheckAt?: number;
    };

export function canaryPassed(spec: RolloutSpec, l: Ledger): boolean {
  if (!spec.canary) return true;
  return Object.values(l.canaries).filter((s) => s === 'passed').length >= spec.canary.nodes;
}

export function canaryFailed(l: Ledger): boolean {
  return Object.values(l.canaries).includes('failed');
}

/** Whether the failures so far spend the budget. `fleetSize`: the nodes seen in this rollout (for the percentage). */
export function budgetExhausted(spec: RolloutSpec, l: Ledger, fleetSize?: number): boolean {
  const b = spec.failureBudget;
  if (!b) return false;
  const failed = l.failed.length;
  if (b.maxFailed !== undefined && failed >= b.maxFailed) return true;
  if (b.maxFailedPercent !== undefined && fleetSize !== undefined && fleetSize > 0)
    return (failed * 100) / fleetSize >= b.maxFailedPercent;
  return false;
}

/** May `node` start its upgrade now? The first refusal in order: halted, paused, window, canary. */
export function decide(
  spec: RolloutSpec,
  ledger: Ledger,
  node: string,
  now: number,
  fleetSize?: number,
): Gate {
  if (canaryFailed(ledger)) return { kind: 'hold', phase: 'held', reason: 'canary-failed' };
  if (budgetExhausted(spec, ledger, fleetSize))
    return { kind: 'hold', phase: 'held', reason: 'budget-exhausted' };
  if (spec.paused) return { kind: 'hold', phase: 'paused', reason: 'paused' };
  const w = windowState(spec.windows, now);
  if (!w.open)
    return {
      kind: 'hold',
      phase: 'held',
      reason: 'window-closed',
      ...(w.opensAt !== undefined ? { recheckAt: w.opensAt } : {}),
    };
  if (spec.canary && !canaryPassed(spec, ledger)) {
    const mine = ledger.canaries[node];
    // its own place, after a restart: it may (re)do its upgrade
    if (mine === 'upgrading' || mine === 'soaking') return { kind: 'start', canary: true };
    if (mine === undefined && Object.keys(ledger.canaries).length < spec.canary.nodes)
      return { kind: 'start', canary: true };
    return { kind: 'hold', phase: 'held', reason: 'canary-running' };
  }
  return { kind: 'start', canary: false };
}

/**
 * The ledger with `node` admitted as a canary, or undefined when it may not
 * be (the C places are taken). Written by compare-and-swap: two nodes that
 * both read C-1 canaries cannot both get in.
 */
export function admitCanary(spec: RolloutSpec, l: Ledger, node: string): Ledger | undefined {
  if (!spec.canary) return undefined;
  const mine = l.canaries[node];
  if (mine === 'upgrading' || mine === 'soaking')
    return { ...l, canaries: { ...l.canaries, [node]: 'upgrading' } };
  if (l.canaries[node] !== undefined || Object.keys(l.canaries).length >= spec.canary.nodes) return undefined;
  return { ...l, canaries: { ...l.canaries, [node]: 'upgrading' } };
}

/** The ledger after a canary's state changed. */
export function withCanary(l: Ledger, node: string, state: CanaryState): Ledger {
  const failed = state === 'failed' && !l.failed.includes(node) ? [...l.failed, node] : l.failed;
  return { ...l, canaries: { ...l.canaries, [node]: state }, failed };
}

/** The ledger after `node` failed or was rolled back (counted once). */
export function withFailure(l: Ledger, node: string): Ledger {
  return l.failed.includes(node) ? l : { ...l, failed: [...l.failed, node] };
}

export type RolloutState = 'paused' | 'halted' | 'canary' | 'rolling' | 'complete';

export interface RolloutSummary {
  readonly rollout: string;
  readonly state: RolloutState;
  readonly reason?: HoldReason;
  readonly nodes: number;
  readonly counts: Readonly<Record<Phase, number>>;
  readonly failed: readonly string[];
  readonly canaries: Readonly<Record<string, CanaryState>>;
}

/** The rollout at a glance, from the spec, the ledger and every node's report. */
export function summarize(spec: RolloutSpec, ledger: Ledger, phases: readonly PhaseReport[]): RolloutSummary {
  const mine = phases.filter((p) => p.rollout === spec.id);
  const counts = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  for (const p of mine) counts[p.phase]++;
  const finished = counts.done + counts.failed + counts['rolled-back'];
  let state: RolloutState;
  let reason: HoldReason | undefined;
  if (canaryFailed(ledger)) [state, reason] = ['halted', 'canary-failed'];
  else if (budgetExhausted(spec, ledger, mine.length)) [state, reason] = ['halted', 'budget-exhausted'];
  else if (spec.paused) [state, reason] = ['paused', 'paused'];
  else if (mine.length > 0 && finished === mine.length) state = 'complete';
  else if (!canaryPassed(spec, ledger)) state = 'canary';
  else state = 'rolling';
  return {
    rollout: spec.id,
    state,
    ...(reason ? { reason } : {}),
    nodes: mine.length,
    counts,
    failed: ledger.failed,
    canaries: ledger.canaries,
  };
}
