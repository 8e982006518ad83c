import { randomUUID } from 'node:crypto';
import { SpcdError } from '../errors.js';
import { startKube } from '../kube/integration.js';
import type { DesiredDocument } from '../rollout/backend.js';
import { applyClusterGlobals } from '../config/cluster-globals.js';
import type { DaemonParts } from './daemon.js';

/** Connects the daemon to the kube/ room: its status, its events, and upgrades on request of the fleet. */
export async function startKubeIntegration(
  parts: DaemonParts,
  kube: { namespace: string; desiredConfigMap: string | undefined; fleetSlots: number },
  nodeName: string,
): Promise<{ stop(): Promise<void> }> {
  const { status, actions, events, reconciler, clock, log, settings, reloadWithGlobals } = parts;
  const waitFor = (operationId: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const off = events.subscribe((e) => {
        if (e.type !== 'operation' || e.operationId !== operationId) return;
        if (e.phase === 'succeeded') {
          off();
          resolve();
        } else if (e.phase === 'failed') {
          off();
          reject(new SpcdError('UPGRADE_FAILED', e.error?.message ?? 'upgrade failed', { operationId }));
        }
      });
    });
  /** This node's containers whose image the document changes. */
  const imageChanges = (images: DesiredDocument['images']) =>
    reconciler
      .desiredContainers()
      .filter((c) => images[c.spec.name] !== undefined && images[c.spec.name] !== c.spec.image);
  const globalsChange = (d: DesiredDocument): boolean =>
    JSON.stringify(d.globals) !== JSON.stringify(parts.clusterGlobals());
  return startKube({
    kubeconfig: settings.kubeconfig,
    nodeName,
    namespace: kube.namespace,
    desiredConfigMap: kube.desiredConfigMap,
    fleetSlots: kube.fleetSlots,
    leaseDurationSeconds: 60,
    sets: () => status.sets(),
    engineAvailable: () => reconciler.engineStatus().available,
    subscribe: (l) => events.subscribe(l),
    rollout: {
      pending: (d) => globalsChange(d) || imageChanges(d.images).length > 0,
      // Before asking for a slot: the images this node would change to, pulled now, outside any window.
      prePull: async (images) => {
        const wanted = reconciler
          .desiredContainers()
          .map((c) => images[c.spec.name])
          .filter((i): i is string => i !== undefined);
        await parts.prePull(wanted, `fleet-prepull-${randomUUID().slice(0, 8)}`);
      },
      // Under the slot: the ConfigMap's globals (re-render, recreate what changed, health-gated:
      // cluster-globals.ts), then its images, one container at a time, each health-gated.
      apply: async (d) => {
        if (globalsChange(d)) {
          const recreated = await applyClusterGlobals(
            {
              reloadWithGlobals,
              desired: () => reconciler.desiredContainers(),
              events,
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
    },
    clock,
    log: log.child({ room: 'kube' }),
  });
}
