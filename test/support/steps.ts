import type { ExecutorDeps } from '../../agent/executor/ports.js';
import type { Step } from '../../agent/planner/types.js';
import type { IntentResult } from '../../agent/reconciler/intents.js';
import type { ContainerLedger } from '../../agent/reconciler/ledger.js';
import { recordStep } from '../../agent/reconciler/step-ledger.js';
import type { StepDeps } from '../../agent/reconciler/steps.js';

/**
 * Runs steps as the launcher does (agent/reconciler/tasks.ts): through the
 * executor table, with their ledger effects around them. `over` replaces
 * what the launcher would give them (the operation, the callbacks).
 */
export function stepRunner(
  ledger: ContainerLedger,
  exec: ExecutorDeps,
  over: Partial<StepDeps> = {},
): (s: Step) => Promise<IntentResult> {
  const deps: StepDeps = {
    exec,
    operationId: 'op-1',
    forgetHealth: () => undefined,
    pinned: () => undefined,
    recovered: () => Promise.resolve(),
    ...over,
  };
  return (s) => recordStep(s, ledger, deps);
}
