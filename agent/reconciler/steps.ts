import type { SpcdError } from '../errors.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { createContainer, removeContainer, startContainer } from '../executor/simple.js';
import { upgradeContainer } from '../executor/upgrade.js';
import type { Step } from '../planner/types.js';
import type { ContainerLedger } from './ledger.js';

/** The container a step acts on. */
export function stepContainer(s: Step): string {
  return s.kind === 'remove' ? s.observed.identity.container : s.desired.spec.name;
}

/** Carries out one planned step (its container held by the caller), telling the ledger what it did. */
export async function runStep(
  exec: ExecutorDeps,
  ledger: ContainerLedger,
  s: Step,
  operationId: string,
): Promise<void> {
  const now = exec.clock.now();
  switch (s.kind) {
    case 'create':
      ledger.created(s.desired.spec.name, now);
      await createContainer(exec, s.desired, operationId);
      ledger.errorCleared(s.desired.spec.name);
      return;
    case 'start':
      ledger.started(s.desired.spec.name, now);
      await startContainer(exec, s.observed, s.reason);
      return;
    case 'remove':
      await removeContainer(exec, s.observed, s.reason, s.definitionDeleted);
      return;
    case 'replace':
      await upgradeContainer(exec, {
        operationId,
        kind: 'recreate',
        spec: s.desired.spec,
        specHash: s.desired.specHash,
        current: s.observed,
        pull: 'missing',
        reason: s.reason,
      });
      return;
  }
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
