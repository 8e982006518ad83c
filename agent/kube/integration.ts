import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { SpcdEvent } from '../model/events.js';
import type { SetStatus } from '../api/types.js';
import { KubeClient } from './client.js';
import { assertTrustedKubeconfig, checkKubeTransport, loadKubeConfig } from './kubeconfig.js';
import { EventRecorder, kubeEventFor } from './event-recorder.js';
import { conditionFor, NodeReporter, reportFromSets } from './node-reporter.js';
import { RolloutRunner, type RolloutActions } from '../rollout/runner.js';
import { KubeRolloutBackend } from './rollout-backend.js';

export interface KubeIntegrationDeps {
  /** A kubeconfig file; in-cluster config when absent. */
  readonly kubeconfig: string | undefined;
  /** --kube-insecure: its cluster may be reached over http:// or without checking its certificate (warned once). */
  readonly insecure: boolean;
  readonly nodeName: string;
  readonly namespace: string;
  /** The ConfigMap with desired images (and globals) for fleet upgrades; none when absent. */
  readonly desiredConfigMap: string | undefined;
  readonly fleetSlots: number;
  readonly leaseDurationSeconds: number;
  readonly sets: () => readonly SetStatus[];
  readonly engineAvailable: () => boolean;
  readonly subscribe: (l: (e: SpcdEvent) => void) => () => void;
  /** This node's share of a rollout: what changes, pre-pull, apply (globals, then images), health. */
  readonly rollout: Omit<RolloutActions, 'health'>;
  readonly clock: Clock;
  readonly log: Logger;
}

/**
 * spcd inside a Kubernetes cluster: node annotations and condition, Events,
 * and fleet-wide upgrades that take one of N Lease slots first. If the API
 * server cannot be reached, reporting retries and no fleet upgrade starts;
 * the managed containers are not affected either way.
 */
export async function startKube(deps: KubeIntegrationDeps): Promise<{ stop(): Promise<void> }> {
  const { clock, log, nodeName, namespace } = deps;
  const loaded = loadKubeConfig(deps.kubeconfig, 'in-cluster');
  await assertTrustedKubeconfig(loaded, 'spcd');
  const warning = checkKubeTransport(loaded, deps.insecure, 'spcd'); // KUBECONFIG_INSECURE: nothing is sent
  if (warning) log.warn({ code: 'KUBECONFIG_INSECURE', kubeconfig: loaded.file ?? null }, warning);
  const api = new KubeClient(loaded.kc);
  const reporter = new NodeReporter({ api, nodeName, clock, log });
  const recorder = new EventRecorder({ api, nodeName, namespace, clock, log });
  const publish = (): void => reporter.report(reportFromSets(deps.sets(), deps.engineAvailable()));
  const unsubscribe = deps.subscribe((e) => {
    const ev = kubeEventFor(e);
    if (ev) void recorder.record(ev);
    if (e.type === 'state' || e.type === 'health' || e.type === 'engine' || e.type === 'operation') publish();
  });
  publish();

  let runner: RolloutRunner | undefined;
  if (deps.desiredConfigMap) {
    const backend = new KubeRolloutBackend({
      api,
      namespace,
      node: nodeName,
      configMap: deps.desiredConfigMap,
      leaseDurationSeconds: deps.leaseDurationSeconds,
      clock,
      log,
      // a whole fleet told at once does not list the slots at once
      startJitterMs: 1000,
    });
    runner = new RolloutRunner({
      node: nodeName,
      backend,
      actions: {
        ...deps.rollout,
        // what the node's condition says: a canary soaking watches it
        health: () => {
          const c = conditionFor(reportFromSets(deps.sets(), deps.engineAvailable())).status;
          return c === 'True' ? 'healthy' : c === 'False' ? 'unhealthy' : 'unknown';
        },
      },
      clock,
      log,
      defaultMaxConcurrent: deps.fleetSlots,
    });
    await runner.start();
  }
  log.info({ nodeName, namespace, desired: deps.desiredConfigMap ?? null }, 'kubernetes integration started');
  return {
    async stop() {
      unsubscribe();
      reporter.stop();
      await runner?.stop();
      api.close();
    },
  };
}
