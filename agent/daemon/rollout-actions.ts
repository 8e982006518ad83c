/**
 * This node's share of a fleet rollout, whichever cluster paces it
 * (Kubernetes: kube-wiring.ts; etcd: etcd-wiring.ts): what the desired
 * document changes here, the pre-pull before queueing, and the apply under
 * the slot (globals, then images, each health-gated).
 */
import { SpcdError } from '../errors.js';
import type { DesiredDocument } from '../rollout/backend.js';
import type { RolloutActions } from '../rollout/runner.js';
import { applyClusterGlobals } from '../config/cluster-globals.js';
import type { DaemonParts } from './daemon.js';

export function nodeRolloutActions(parts: DaemonParts): Omit<RolloutActions, 'health'> {
  const { actions, reconciler, clock, log, reloadWithGlobals } = parts;
  const waitFor = async (operationId: string): Promise<void> => {
    const outcome = await reconciler.operations.done(operationId);
    if (outcome.phase !== 'succeeded')
      throw new SpcdError('UPGRADE_FAILED', outcome.error.message, { operationId });
  };
  /** This node's containers whose image the document changes. */
  const imageChanges = (images: DesiredDocument['images']) =>
    reconciler
      .desiredContainers()
      .filter((c) => images[c.spec.name] !== undefined && images[c.spec.name] !== c.spec.image);
  const globalsChange = (d: DesiredDocument): boolean =>
    JSON.stringify(d.globals) !== JSON.stringify(parts.clusterGlobals());
  return {
    pending: (d) => globalsChange(d) || imageChanges(d.images).length > 0,
    // Before asking for a slot: the images this node would change to, pulled now, outside any window.
    prePull: async (images) => {
      const wanted = reconciler
        .desiredContainers()
        .map((c) => images[c.spec.name])
        .filter((i): i is string => i !== undefined);
      // Under an operation of kind `pre-pull` (pre-pull-operation.ts): its failure is recorded there too.
      await parts.prePull(wanted).running;
    },
    // Under the slot: the ConfigMap's globals (re-render, recreate what changed, health-gated:
    // config/cluster-globals.ts), then its images, one container at a time, each health-gated.
    apply: async (d) => {
      if (globalsChange(d)) {
        const recreated = await applyClusterGlobals(
          {
            reloadWithGlobals,
            desired: () => reconciler.desiredContainers(),
            operations: reconciler.operations,
            clock,
            deadlineMs: 30 * 60_000,
          },
          { ...d.globals },
        );
        log.info({ recreated }, 'cluster globals applied');
      }
      for (const c of imageChanges(d.images)) {
        const ref = await actions.upgrade(c.spec.name, { image: d.images[c.spec.name]! });
        await waitFor(ref.operationId);
      }
    },
  };
}
