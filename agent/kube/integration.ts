import { KubeConfig } from '@kubernetes/client-node';
import { isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { SpcdEvent } from '../model/events.js';
import type { SetStatus } from '../api/types.js';
import { KubeClient } from './client.js';
import { DesiredWatcher, type DesiredFromConfigMap } from './desired-watcher.js';
import { EventRecorder, kubeEventFor } from './event-recorder.js';
import { FleetSlots } from './fleet-slots.js';
import { runFleetUpgrade } from './fleet-upgrade.js';
import { NodeReporter, reportFromSets } from './node-reporter.js';

export interface KubeIntegrationDeps {
  /** A kubeconfig file; in-cluster config when absent. */
  readonly kubeconfig: string | undefined;
  readonly nodeName: string;
  readonly namespace: string;
  /** The ConfigMap with desired images (and globals) for fleet upgrades; none when absent. */
  readonly desiredConfigMap: string | undefined;
  readonly fleetSlots: number;
  readonly leaseDurationSeconds: number;
  readonly sets: () => readonly SetStatus[];
  readonly engineAvailable: () => boolean;
  readonly subscribe: (l: (e: SpcdEvent) => void) => () => void;
  /** Upgrades this node's containers to these images, health-gated; resolves when all are done. */
  readonly applyImages: (images: Readonly<Record<string, string>>) => Promise<void>;
  /** Re-renders with these globals over the globals file; resolves once what changed is recreated, health-gated. */
  readonly applyGlobals: (globals: Readonly<Record<string, unknown>>) => Promise<void>;
  /** Pulls the images this node's containers would change to; rejects when a pull fails. */
  readonly prePull: (images: Readonly<Record<string, string>>) => Promise<void>;
  /** The cluster globals already in force on this node (applied before a restart). */
  readonly initialGlobals: Readonly<Record<string, unknown>>;
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
  const kc = new KubeConfig();
  if (deps.kubeconfig) kc.loadFromFile(deps.kubeconfig);
  else kc.loadFromCluster();
  const api = new KubeClient(kc);
  const { clock, log, nodeName, namespace } = deps;
  const reporter = new NodeReporter({ api, nodeName, clock, log });
  const recorder = new EventRecorder({ api, nodeName, namespace, clock, log });
  const publish = (): void => reporter.report(reportFromSets(deps.sets(), deps.engineAvailable()));
  const unsubscribe = deps.subscribe((e) => {
    const ev = kubeEventFor(e);
    if (ev) void recorder.record(ev);
    if (e.type === 'state' || e.type === 'health' || e.type === 'engine' || e.type === 'operation') publish();
  });
  publish();

  let watcher: DesiredWatcher | undefined;
  let upgrading: Promise<void> = Promise.resolve();
  if (deps.desiredConfigMap) {
    const slots = new FleetSlots(
      { api, namespace, holder: nodeName, clock, log },
      { slots: deps.fleetSlots, leaseDurationSeconds: deps.leaseDurationSeconds },
    );
    let lastVersion = '';
    /** The globals last asked for ({} = none: the ConfigMap has no globals, or is gone). */
    let lastGlobals = JSON.stringify(deps.initialGlobals);
    const onChange = (d: DesiredFromConfigMap | undefined): void => {
      if (d && d.resourceVersion === lastVersion) return;
      const globals = d?.globals ?? {};
      const globalsText = JSON.stringify(globals);
      const globalsChanged = globalsText !== lastGlobals;
      const images = d?.images ?? {};
      if (!globalsChanged && Object.keys(images).length === 0) return;
      if (d) lastVersion = d.resourceVersion;
      const previousGlobals = lastGlobals;
      lastGlobals = globalsText;
      // One fleet upgrade at a time on this node, in arrival order; globals, then images,
      // under the same slot: a globals change recreates containers too.
      upgrading = upgrading
        .then(async () => {
          // Phase "pull", before queueing: a slot is never held while images download,
          // and a node that cannot pull does not take a slot from one that can.
          try {
            await deps.prePull(images);
          } catch (err) {
            const code = isSpcdError(err) ? err.code : 'INTERNAL';
            log.warn(
              { phase: 'pull', code, err: (err as Error).message },
              'fleet upgrade: pre-pull failed; no slot taken',
            );
            // Not applied: a later ConfigMap with the same globals must still apply them.
            if (lastGlobals === globalsText) lastGlobals = previousGlobals;
            return;
          }
          await runFleetUpgrade(
            slots,
            async () => {
              if (globalsChanged) await deps.applyGlobals(globals);
              if (Object.keys(images).length > 0) await deps.applyImages(images);
            },
            { clock, log, startJitterMs: 1000 },
          );
        })
        .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'fleet upgrade did not complete'));
    };
    watcher = new DesiredWatcher(
      { api, namespace, clock, log },
      { configMapName: deps.desiredConfigMap, onChange },
    );
    await watcher.start();
  }
  log.info({ nodeName, namespace, desired: deps.desiredConfigMap ?? null }, 'kubernetes integration started');
  return {
    async stop() {
      unsubscribe();
      watcher?.stop();
      reporter.stop();
      await upgrading;
      api.close();
    },
  };
}
