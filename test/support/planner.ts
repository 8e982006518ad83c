/** Builders for the planner's inputs, shared by the planner's unit tests. */
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import type { DesiredContainer, Intent, OperatorOrigin, StepOperation } from '../../agent/planner/types.js';

export const desiredOf = (s: ContainerSpec, configHash = 'none'): DesiredContainer => ({
  spec: s,
  specHash: specHash(s),
  configHash,
});

/** A running instance of `d` at generation `gen`, labelled with d's hashes; `over` changes any field. */
export function observedOf(
  d: DesiredContainer,
  over: Partial<ObservedContainer> = {},
  gen = 1,
): ObservedContainer {
  return {
    id: `${d.spec.name}-id-${gen}`,
    name: d.spec.name,
    identity: {
      instance: 'i',
      set: 's',
      container: d.spec.name,
      generation: gen,
      specHash: d.specHash,
      configHash: d.configHash,
    },
    state: 'running',
    image: d.spec.image,
    imageId: 'sha256:x',
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '',
    exitCode: 0,
    pid: 100,
    ...over,
  };
}

/** The origins a step carries (the planner sets them; tests that build steps by hand use these). */
export const byOperator = (operation: StepOperation): OperatorOrigin => ({ by: 'operator', operation });
export const BY_HEAL = { by: 'heal' } as const;
export const BY_PLAN = { by: 'plan' } as const;

/** The operator's upgrade to `spec` (pulled when missing, not forced); `definitionHash` is the definition's on disk. */
export const upgradeIntent = (
  spec: ContainerSpec,
  definitionHash: string,
  id = 'upgrade-1',
): Extract<Intent, { verb: 'change' }> => ({
  verb: 'change',
  operation: { id, kind: 'upgrade' },
  change: 'upgrade',
  spec,
  definitionHash,
  pull: 'missing',
  force: false,
});
