import { SpcdError } from '../errors.js';
import { startKube } from '../kube/integration.js';
import type { DaemonParts } from './daemon.js';

/** Connects the daemon to the kube/ room: its status, its events, and upgrades on request of the fleet. */
export async function startKubeIntegration(
  parts: DaemonParts,
  kube: { namespace: string; desiredConfigMap: string | undefined; fleetSlots: number },
  nodeName: string,
): Promise<{ stop(): Promise<void> }> {
  const { status, actions, events, reconciler, clock, log, settings } = parts;
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
    clock,
    log: log.child({ room: 'kube' }),
  });
}
