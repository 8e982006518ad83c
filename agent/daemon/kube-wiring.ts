import { startKube } from '../kube/integration.js';
import type { DaemonParts } from './daemon.js';
import type { KubeSettings } from './settings.js';
import { nodeRolloutActions } from './rollout-actions.js';

/** Connects the daemon to the kube/ room: its status, its events, and upgrades on request of the fleet. */
export async function startKubeIntegration(
  parts: DaemonParts,
  kube: KubeSettings,
  nodeName: string,
): Promise<{ stop(): Promise<void> }> {
  const { status, events, reconciler, clock, log, settings } = parts;
  return startKube({
    kubeconfig: settings.kubeconfig,
    insecure: kube.insecure,
    nodeName,
    namespace: kube.namespace,
    desiredConfigMap: kube.desiredConfigMap,
    fleetSlots: kube.fleetSlots,
    leaseDurationSeconds: 60,
    sets: () => status.sets(),
    engineAvailable: () => reconciler.engineStatus().available,
    subscribe: (l) => events.subscribe(l),
    rollout: nodeRolloutActions(parts),
    clock,
    log: log.child({ room: 'kube' }),
  });
}
