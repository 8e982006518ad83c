import { createApiHandler, listenMetricsTcp, listenUnix } from '../api/index.js';
import type { DaemonParts } from './daemon.js';
import { packageVersion } from './daemon.js';

/**
 * Serves the operator API on the unix socket (root + admin group, 0660, in a
 * 0750 directory), and /metrics on TCP only when --metrics-listen asks.
 */
export async function serveApi(parts: DaemonParts): Promise<{ close(): Promise<void> }> {
  const { settings, log } = parts;
  const handler = createApiHandler({
    status: parts.status,
    actions: parts.actions,
    log,
    version: packageVersion(),
    metrics: parts.metrics,
  });
  const unix = await listenUnix(handler, {
    socketPath: settings.socketPath,
    ...(settings.adminGroup !== undefined ? { group: settings.adminGroup } : {}),
    log,
  });
  let tcp: { close(): Promise<void> } | undefined;
  if (settings.metricsListen) {
    const colon = settings.metricsListen.lastIndexOf(':');
    tcp = await listenMetricsTcp(handler, {
      host: settings.metricsListen.slice(0, colon).replace(/^\[|\]$/g, ''),
      port: Number(settings.metricsListen.slice(colon + 1)),
    });
    log.info({ listen: settings.metricsListen }, 'read-only metrics listener');
  }
  log.info({ socket: settings.socketPath }, 'API listening');
  return {
    async close() {
      await tcp?.close();
      await unix.close();
    },
  };
}
