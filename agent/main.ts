/**
 * spcd's composition root: compile settings, build the rooms, serve the API,
 * converge, and stop cleanly on SIGTERM/SIGINT without stopping a single
 * managed container (they belong to dockerd, not to this process).
 */
import { createLogger } from './log.js';
import { SpcdError } from './errors.js';
import { buildDaemon, describeStartupError, packageVersion } from './daemon/daemon.js';
import { parseSettings, usage } from './daemon/settings.js';
import { serveApi } from './daemon/serve-api.js';
import { SdNotify } from './daemon/sdnotify.js';

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let settings;
  try {
    const parsed = parseSettings(argv, env);
    if (parsed === 'help') {
      process.stdout.write(`${usage()}\n`);
      return 0;
    }
    if (parsed === 'version') {
      process.stdout.write(`spcd ${packageVersion()}\n`);
      return 0;
    }
    settings = parsed;
  } catch (err) {
    process.stderr.write(`spcd: ${err instanceof SpcdError ? err.message : String(err)}\n`);
    return 2;
  }
  const log = createLogger({ level: settings.logLevel });
  const notify = new SdNotify(env, { log });
  // The watchdog is fed only from the reconcile loop's heartbeat: a hung loop starves it.
  let lastBeat = 0;
  const beatEvery = Math.max(1_000, (notify.watchdogIntervalMs() ?? 10_000) / 2);
  const onHeartbeat = (): void => {
    const now = Date.now();
    if (now - lastBeat < beatEvery) return;
    lastBeat = now;
    notify.watchdog();
  };
  let daemon;
  try {
    daemon = await buildDaemon(settings, log, { env, onHeartbeat });
  } catch (err) {
    process.stderr.write(`spcd: cannot start: ${describeStartupError(err)}\n`);
    log.error({ err: describeStartupError(err) }, 'cannot start');
    return 1;
  }
  let api: { close(): Promise<void> } | undefined;
  try {
    api = await serveApi(daemon);
  } catch (err) {
    process.stderr.write(`spcd: cannot serve the API: ${describeStartupError(err)}\n`);
    await daemon.stop();
    return 1;
  }
  let stopping: Promise<void> | undefined;
  const stop = (signal: string): Promise<void> => {
    stopping ??= (async () => {
      log.info({ signal }, 'stopping; managed containers keep running');
      notify.stopping();
      await kube?.stop();
      await api?.close();
      await daemon.stop();
    })();
    return stopping;
  };
  process.on('SIGHUP', () => {
    log.info('SIGHUP: reloading definitions');
    void daemon.actions.reload().catch(() => undefined);
  });
  const done = new Promise<void>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void stop(sig).then(resolve));
  });
  try {
    await daemon.start();
  } catch (err) {
    if (!stopping) {
      process.stderr.write(`spcd: ${describeStartupError(err)}\n`);
      await stop('startup-failure');
      return 1;
    }
  }
  let kube: { stop(): Promise<void> } | undefined;
  if (settings.kube && settings.nodeName) {
    try {
      // Loaded only when enabled: the Kubernetes client alone costs ~75 MB of RSS.
      const { startKubeIntegration } = await import('./daemon/kube-wiring.js');
      kube = await startKubeIntegration(daemon, settings.kube, settings.nodeName);
    } catch (err) {
      // Kubernetes is for reporting and fleet pacing: the containers do not depend on it.
      log.error(
        { err: (err as Error).message },
        'kubernetes integration did not start; continuing without it',
      );
    }
  }
  log.info({ socket: settings.socketPath, instance: settings.instance }, 'spcd ready');
  notify.ready('sets adopted; API listening');
  await done;
  return 0;
}
