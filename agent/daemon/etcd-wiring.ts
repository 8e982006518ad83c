/**
 * Connects the daemon to an etcd cluster for fleet rollouts on hosts without
 * Kubernetes: the desired document, the ledger, the phases and the N slots
 * under one key prefix (rollout-backend.ts), the same rollout runner and the
 * same node actions as over Kubernetes. If etcd cannot be reached, no fleet
 * upgrade starts; the managed containers are not affected either way.
 */
import { conditionFor, reportFromSets } from '../kube/node-reporter.js';
import { RolloutRunner } from '../rollout/runner.js';
import { connectEtcd, trustedEtcdFiles } from '../etcd/client.js';
import { EtcdRolloutBackend } from '../etcd/rollout-backend.js';
import type { EtcdSettings } from '../etcd/settings.js';
import type { DaemonParts } from './daemon.js';
import { nodeRolloutActions } from './rollout-actions.js';

/** A dead node's slot frees after this (the lease's TTL); the holder renews it every third. */
export const SLOT_TTL_SECONDS = 60;

export async function startEtcdIntegration(
  parts: DaemonParts,
  etcd: EtcdSettings,
  nodeName: string,
): Promise<{ stop(): Promise<void> }> {
  const { status, reconciler, clock } = parts;
  const log = parts.log.child({ room: 'etcd' });
  const client = connectEtcd(
    await trustedEtcdFiles({
      endpoints: etcd.endpoints,
      caFile: etcd.caFile,
      certFile: etcd.certFile,
      keyFile: etcd.keyFile,
      user: etcd.user,
      passwordFile: etcd.passwordFile,
    }),
  );
  if (etcd.insecure)
    log.warn(
      { endpoints: etcd.endpoints },
      '--etcd-insecure: the fleet channel is plaintext; anyone on the path can read it and change what this node runs',
    );
  const backend = new EtcdRolloutBackend({
    client,
    prefix: etcd.prefix,
    node: nodeName,
    slotTtlSeconds: SLOT_TTL_SECONDS,
    clock,
    log,
  });
  const runner = new RolloutRunner({
    node: nodeName,
    backend,
    actions: {
      ...nodeRolloutActions(parts),
      // a soaking canary watches what the node's sets say (the same rule as the Kubernetes condition)
      health: () => {
        const c = conditionFor(reportFromSets(status.sets(), reconciler.engineStatus().available)).status;
        return c === 'True' ? 'healthy' : c === 'False' ? 'unhealthy' : 'unknown';
      },
    },
    clock,
    log,
    defaultMaxConcurrent: etcd.fleetSlots,
  });
  try {
    await runner.start();
  } catch (err) {
    client.close();
    throw err;
  }
  log.info({ nodeName, endpoints: etcd.endpoints, prefix: etcd.prefix }, 'etcd fleet integration started');
  return {
    async stop() {
      await runner.stop();
      await backend.close();
      client.close();
    },
  };
}
