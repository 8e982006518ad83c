import { createApiHandlers, listenMetricsTcp, listenUnix } from '../api/index.js';
import type { DaemonParts } from './daemon.js';
import { packageVersion } from './daemon.js';

/**
 * Serves the operator API on the admin socket (root + admin group, 0660, in a
 * 0750 directory), the reads on the read-only socket (root + read-only
 * group, the same modes, in a directory of its own), and /metrics on TCP
 * only when --metrics-listen asks. Both sockets are made the same way
 * (listenUnix); only the handler and the group differ.
 */
export async function serveApi(parts: DaemonParts): Promise<{ close(): Promise<void> }> {
  const { settings, log } = parts;
  const handlers = createApiHandlers({
    status: parts.status,
    actions: parts.actions,
    log,
    version: packageVersion(),
    metrics: parts.metrics,
  });
  const opened: { close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    for (const s of [...opened].reverse()) await s.close();
  };
  try {
    opened.push(
      await listenUnix(handlers.admin, {
        socketPath: settings.socketPath,
        ...(settings.adminGroup !== undefined ? { group: settings.adminGroup } : {}),
        log,
      }),
    );
    if (settings.readOnlySocketPath !== undefined) {
      opened.push(
        await listenUnix(handlers.readOnly, {
          socketPath: settings.readOnlySocketPath,
          ...(settings.readOnlyGroup !== undefined ? { group: settings.readOnlyGroup } : {}),
          log,
        }),
      );
    }
    if (settings.metricsListen) {
      const colon = settings.metricsListen.lastIndexOf(':');
      opened.push(
        await listenMetricsTcp(handlers.readOnly, {
          host: settings.metricsListen.slice(0, colon).replace(/^\[|\]$/g, ''),
          port: Number(settings.metricsListen.slice(colon + 1)),
        }),
      );
      log.info({ listen: settings.metricsListen }, 'read-only metrics listener');
    }
  } catch (err) {
    await closeAll();
    throw err;
  }
  log.info(
    { socket: settings.socketPath, readOnlySocket: settings.readOnlySocketPath ?? null },
    'API listening',
  );
  return { close: closeAll };
}
