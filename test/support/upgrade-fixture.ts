import type { UpgradeRequest } from '../../agent/executor/upgrade.js';
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { INSTANCE, type FakeProcess } from './fake-executor.js';
import { containerSpec } from './spec.js';

/** The container the upgrade unit tests move from generation 1 (OLD) to 2 (NEXT). */
export const OLD = containerSpec('svc', { image: 'img:1' });
export const NEXT: ContainerSpec = { ...OLD, image: 'img:2' };

/** An operator's upgrade of `current` to NEXT. */
export function upgradeTo(current: ObservedContainer): UpgradeRequest {
  return {
    operationId: 'op-up',
    kind: 'upgrade',
    spec: NEXT,
    specHash: specHash(NEXT),
    current,
    pull: 'missing',
    reason: 'test',
  };
}

/** Every container of the instance, as name:state:gN, sorted. */
export function engineView(p: FakeProcess): string[] {
  return [...p.engine.containers.values()]
    .filter((c) => c.identity.instance === INSTANCE)
    .map((c) => `${c.name}:${c.state}:g${c.identity.generation}`)
    .sort();
}
