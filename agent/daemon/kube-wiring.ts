import { randomUUID } from 'node:crypto';
import { SpcdError } from '../errors.js';
import { startKube } from '../kube/integration.js';
import { applyClusterGlobals } from './cluster-globals.js';
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
    // This node's share of a fleet upgrade: its containers named in the map, one at a time, each health-gated.
    applyImages: async (images) => {
      for (const c of reconciler.desiredContainers()) {
        const image = images[c.spec.name];
        if (!image || c.spec.image === image) continue;
        const ref = await actions.upgrade(c.spec.name, { image });
        await waitFor(ref.operationId);
      }
    },
    initialGlobals: parts.clusterGlobals(),
    // Before asking for a slot: the images this node would change to, pulled now, outside any window.
    prePull: async (images) => {
      const wanted = reconciler
        .desiredContainers()
        .map((c) => images[c.spec.name])
        .filter((i): i is string => i !== undefined);
      await parts.prePull(wanted, `fleet-prepull-${randomUUID().slice(0, 8)}`);
    },
    // The ConfigMap's globals: re-render, recreate what changed, health-gated (cluster-globals.ts).
    applyGlobals: async (globals) => {
      const recreated = await applyClusterGlobals(
        {
          reloadWithGlobals,
          desired: () => reconciler.desiredContainers(),
          events,
          clock,
          deadlineMs: 30 * 60_000,
        },
        { ...globals },
      );
      log.info({ recreated }, 'cluster globals applied');
    },
    clock,
    log: log.child({ room: 'kube' }),
  });
}
