/**
 * spcd's composition root: compile settings, build the rooms, serve the API,
 * converge, and stop cleanly on SIGTERM/SIGINT without stopping a single
 * managed container (they belong to dockerd, not to this process).
 *
 * Start-up is an ordered list of components (daemon/lifecycle.ts): a failure
 * at any point, or a signal while a start waits, closes what was opened.
 */
import { createLogger } from './log.js';
import { SpcdError } from './errors.js';
import { buildDaemon, type Daemon } from './daemon/daemon.js';
import { buildInfo, formatVersion } from './version.js';
import { describeStartupError } from './daemon/startup-error.js';
import { Components } from './daemon/lifecycle.js';
import { parseSettings, usage } from './daemon/settings.js';
import { SdNotify } from './host/sdnotify.js';
import { StateDirLock } from './state/lock.js';
import { loadImagePolicyFile } from './spec/image-policy.js';

/** Start-up beside a recovery's gate: adoption, the first preflight, the first pass. */
const START_MARGIN_MS = 60_000;

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let settings;
  let imagePolicy;
  try {
    const parsed = parseSettings(argv, env);
    if (parsed === 'help') {
      process.stdout.write(`${usage()}\n`);
      return 0;
    }
    if (parsed === 'version') {
      process.stdout.write(`${formatVersion('spcd', buildInfo())}\n`);
      return 0;
    }
    settings = parsed;
    imagePolicy = parsed.imagePolicyFile ? await loadImagePolicyFile(parsed.imagePolicyFile) : undefined;
  } catch (err) {
    process.stderr.write(`spcd: ${err instanceof SpcdError ? err.message : String(err)}\n`);
    return 2;
  }
  const cfg = settings;
  const log = createLogger({ level: cfg.logLevel });
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

  const lock = new StateDirLock(cfg.stateDir);
  // Built without opening anything: the list below is whole before the first await.
  let daemon: Daemon;
  try {
    daemon = buildDaemon(cfg, log, { env, onHeartbeat, ...(imagePolicy ? { imagePolicy } : {}) });
  } catch (err) {
    process.stderr.write(`spcd: cannot start (build): ${describeStartupError(err)}\n`);
    return 1;
  }
  const components = new Components(
    [{ name: 'state-lock', start: () => lock.acquire(), stop: () => lock.release() }, ...daemon.components],
    log,
  );

  let stopped: Promise<void> | undefined;
  const stop = (signal: string): Promise<void> => {
    stopped ??= (async () => {
      log.info({ signal }, 'stopping; managed containers keep running');
      notify.stopping();
      await components.stop();
    })();
    return stopped;
  };
  const done = new Promise<void>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void stop(sig).then(resolve));
  });
  process.on('SIGHUP', () => {
    log.info('SIGHUP: reloading definitions');
    // Before start-up has read the definitions there is nothing to reload (it refuses).
    void daemon.actions.reload().catch(() => undefined);
  });

  // Start-up may gate an upgrade that a killed spcd left started (journal
  // recovery rolls it forward: docs/decisions/0060-recovery-rolls-forward.md),
  // which takes up to the gate deadline: systemd's start timeout covers it.
  notify.extendTimeout(cfg.gateDeadlineMs + START_MARGIN_MS);
  const outcome = await components.start();
  if (outcome.kind === 'failed') {
    const why = describeStartupError(outcome.error);
    process.stderr.write(`spcd: cannot start (${outcome.component}): ${why}\n`);
    log.error({ component: outcome.component, err: why }, 'cannot start; everything opened is closed');
    return 1;
  }
  if (outcome.kind === 'stopped') {
    await stopped;
    return 0;
  }
  log.info({ socket: cfg.socketPath, instance: cfg.instance }, 'spcd ready');
  notify.ready('sets adopted; API listening');
  await done;
  return 0;
}
