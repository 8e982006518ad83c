import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { systemClock, type Clock } from '../model/clock.js';
import { EventBus } from '../model/events.js';
import { allContainers, type DesiredState } from '../model/spec.js';
import { DockerEngine } from '../engine/docker.js';
import { HealthManager } from '../health/manager.js';
import { envFailpoint } from '../executor/failpoint.js';
import { resolveImage } from '../executor/image.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { HealthSync } from '../reconciler/health-sync.js';
import { Reconciler } from '../reconciler/reconciler.js';
import { loadDesired } from '../spec/load.js';
import { ReloadRetry } from './reload-retry.js';
import { assertTrustedDir } from '../spec/trusted-dirs.js';
import { Journal } from '../state/journal.js';
import { StateStore } from '../state/store.js';
import type { PlanItem, PlanView } from '../api/types.js';
import { DaemonActions } from './actions.js';
import { desiredContainers, heldContainers, stalePins } from '../planner/pins.js';
import { Operations } from './operations.js';
import { MountPreparer, type ConfigPort } from './preparer.js';
import { readClusterGlobals, writeClusterGlobals } from './cluster-globals.js';
import { TemplateConfig } from './config.js';
import { registryAuthFromFile } from './registry-auth.js';
import type { Settings } from './settings.js';
import { DaemonStatus } from './status-view.js';
import { MetricsRegistry } from '../api/registry.js';
import { registerDaemonMetrics } from './metrics.js';
import { CgroupExitWatch } from './exit-watch.js';
import { ProcVmProbe } from './vm-probe.js';
import { runPreflight } from '../preflight/run.js';
import type { PreflightReport } from '../preflight/types.js';

export interface DaemonParts {
  readonly settings: Settings;
  readonly log: Logger;
  readonly clock: Clock;
  readonly events: EventBus;
  readonly engine: DockerEngine;
  readonly state: StateStore;
  readonly health: HealthManager;
  readonly reconciler: Reconciler;
  readonly status: DaemonStatus;
  readonly actions: DaemonActions;
  /** The one metrics registry; the API adds its families to it and renders it. */
  readonly metrics: MetricsRegistry;
  /** A reload with these cluster globals (the desired ConfigMap's), as a local reload otherwise. */
  readonly reloadWithGlobals: (globals: Record<string, unknown>) => Promise<Record<string, unknown>>;
  /** The cluster globals in force (last applied, kept across restarts). */
  readonly clusterGlobals: () => Record<string, unknown>;
  /** Makes these images present (pulled when missing), touching no container. */
  readonly prePull: (images: readonly string[], operationId: string) => Promise<void>;
}

export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** Loads the definitions, turning any problem into one typed error (nothing half-applied). */
export async function loadDefinitions(settings: Settings): Promise<DesiredState> {
  // Whoever can write these is root on the host: refuse them unless only root can (docs/security.md).
  await assertTrustedDir(settings.templatesDir, 'templates directory');
  await assertTrustedDir(settings.healthchecksDir, 'checks directory');
  return loadDesired({
    setsDir: settings.setsDir,
    ...(settings.overridesFile ? { overridesFile: settings.overridesFile } : {}),
    checkLibraryFile: join(settings.healthchecksDir, 'library.yaml'),
  });
}

export type Daemon = DaemonParts & { start(): Promise<void>; stop(): Promise<void> };

const NO_DEFINITIONS: DesiredState = { sets: [] };

/**
 * Builds every room and wires them (the composition root's body). Nothing is
 * started: start() adopts, recovers and converges.
 *
 * Definitions or values that cannot be read do not stop spcd: it holds what
 * runs (restarting what exits, creating, replacing and removing nothing),
 * reports the problem in the status and the log, and applies the
 * definitions at the first reload that reads them cleanly.
 */
export async function buildDaemon(
  settings: Settings,
  log: Logger,
  opts: { clock?: Clock; config?: ConfigPort; env?: NodeJS.ProcessEnv; onHeartbeat?: () => void } = {},
): Promise<Daemon> {
  const clock = opts.clock ?? systemClock;
  const events = new EventBus();
  const engine = new DockerEngine({ socketPath: settings.dockerSocket, log: log.child({ room: 'engine' }) });
  const state = new StateStore(settings.stateDir);
  const lost = await state.load(new Date(clock.now()));
  if (lost) log.error({ ...lost }, 'state.json unusable: set aside, rebuilding from container labels');
  const journal = new Journal(settings.stateDir);
  await journal.init();
  const templateConfig = new TemplateConfig({
    templatesDir: settings.templatesDir,
    configRoot: settings.configRoot,
    files: { globalsFile: settings.globalsFile, secretsFile: settings.secretsFile },
    log: log.child({ room: 'render' }),
  });
  let definitions = NO_DEFINITIONS;
  /** Why the definitions are not in force (spcd holds what runs); undefined once they are. */
  let loadError: SpcdError | undefined;
  /** The desired ConfigMap's globals last applied (kube-wiring.ts), kept across restarts; {} outside a cluster. */
  let clusterGlobals: Record<string, unknown> = {};
  try {
    clusterGlobals = await readClusterGlobals(settings.stateDir);
  } catch (err) {
    // The ConfigMap delivers them again once the kube integration runs.
    log.error(
      { code: toSpcdError(err).code, err: (err as Error).message },
      'cluster globals unreadable; ignored',
    );
  }
  try {
    const read = await loadDefinitions(settings);
    await templateConfig.load(read, clusterGlobals);
    definitions = read;
  } catch (err) {
    loadError = toSpcdError(err);
  }
  const config: ConfigPort = opts.config ?? templateConfig;
  const health = new HealthManager({ exec: engine, clock, log: log.child({ room: 'health' }) });
  // The only owner of health watches: the reconciler's passes and the executor's health gate.
  const healthSync = new HealthSync(health, clock);
  const exec: ExecutorDeps = {
    engine,
    state,
    journal,
    health: healthSync,
    preparer: new MountPreparer(settings.healthchecksDir, config),
    vms: new ProcVmProbe(),
    exits: new CgroupExitWatch(clock),
    events,
    log: log.child({ room: 'executor' }),
    clock,
    failpoint: envFailpoint(opts.env ?? process.env),
    instance: settings.instance,
    gateDeadlineMs: settings.gateDeadlineMs,
    minReadyMs: settings.minReadyMs,
    pullActivityTimeoutMs: settings.pullActivityTimeoutMs,
    registryAuth: registryAuthFromFile(settings.registryAuthFile),
  };
  const reconciler = new Reconciler({
    engine,
    exec,
    health: healthSync,
    events,
    log: log.child({ room: 'reconciler' }),
    clock,
    instance: settings.instance,
    relistMs: settings.relistMs,
    ...(opts.onHeartbeat ? { onHeartbeat: opts.onHeartbeat } : {}),
  });
  const operations = new Operations({ events, clock, log: log.child({ room: 'operations' }) });
  const computeDesired = async (): Promise<ReturnType<typeof desiredContainers>> => {
    for (const name of stalePins(definitions, state)) await state.setPin(name, undefined);
    return desiredContainers(definitions, state, (s) => config.hash(s));
  };
  const reload = async (nextGlobals?: Record<string, unknown>): Promise<Record<string, unknown>> => {
    reloadRetry.begin();
    try {
      const answer = await reloadOnce(nextGlobals);
      reloadRetry.succeeded();
      return answer;
    } catch (err) {
      retryGlobals = nextGlobals;
      reloadRetry.failed(toSpcdError(err).code);
      throw err;
    }
  };
  // A reload that failed on a full or failing disk is tried again by itself (SIGHUP has no one to tell).
  let retryGlobals: Record<string, unknown> | undefined;
  const reloadRetry = new ReloadRetry(clock, log.child({ room: 'reload' }), () => reload(retryGlobals));
  const reloadOnce = async (nextGlobals?: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const globalsNext = nextGlobals ?? clusterGlobals;
    let next: DesiredState;
    try {
      next = await loadDefinitions(settings);
    } catch (err) {
      const e = toSpcdError(err);
      if (loadError) loadError = e;
      events.publish({ type: 'reload', at: clock.now(), ok: false, detail: e.message });
      throw e;
    }
    const previous = definitions;
    let desired: Awaited<ReturnType<typeof computeDesired>>;
    try {
      await templateConfig.load(next, globalsNext);
      definitions = next;
      desired = await computeDesired();
      if (nextGlobals) await writeClusterGlobals(settings.stateDir, nextGlobals);
    } catch (err) {
      // Nothing half-applied: the old definitions and values stay in force.
      definitions = previous;
      await templateConfig.load(previous, clusterGlobals).catch(() => undefined);
      const e = toSpcdError(err);
      if (loadError) loadError = e;
      events.publish({ type: 'reload', at: clock.now(), ok: false, detail: e.message });
      throw e;
    }
    clusterGlobals = globalsNext;
    const plan = reconciler.preview(desired);
    reconciler.setDesired(desired);
    if (loadError) log.info('definitions read cleanly: applying them; the hold ends');
    loadError = undefined;
    // A reload is also how an operator clears a quarantine (docs/upgrades.md): each is tried again.
    const quarantined = await reconciler.retryQuarantined();
    events.publish({ type: 'reload', at: clock.now(), ok: true, detail: `${desired.length} containers` });
    return {
      containers: desired.length,
      changes: plan.steps.map((s) => ({ kind: s.kind, reason: s.reason })),
      ...(quarantined.length > 0 ? { quarantined } : {}),
    };
  };
  const planView = async (): Promise<PlanView> => {
    const problems: string[] = [];
    let next = definitions;
    // A preview reads the definitions and values as they are on disk now, without applying them.
    const preview = templateConfig.fork();
    try {
      next = await loadDefinitions(settings);
      await preview.load(next, clusterGlobals);
    } catch (err) {
      problems.push(toSpcdError(err).message);
      next = definitions;
      await preview.load(definitions, clusterGlobals).catch(() => undefined);
    }
    let desired: ReturnType<typeof desiredContainers>;
    try {
      desired = desiredContainers(next, state, (s) => preview.hash(s));
    } catch (err) {
      problems.push(toSpcdError(err).message);
      desired = [...reconciler.desiredContainers()];
    }
    const p = reconciler.preview(desired);
    const items: PlanItem[] = [];
    for (const s of p.steps) {
      if (s.kind === 'remove') {
        items.push({
          container: s.observed.identity.container,
          set: s.observed.identity.set,
          action: 'remove',
          reason: s.reason,
        });
        continue;
      }
      if (s.kind === 'stop' || s.kind === 'upgrade') continue; // the operator's and heals' steps: not previewed
      const action = s.kind === 'replace' ? 'recreate' : s.kind;
      const diffs = s.kind === 'start' ? [] : await preview.diff(s.desired.spec).catch(() => []);
      items.push({
        container: s.desired.spec.name,
        set: s.desired.spec.set,
        action,
        reason: s.reason,
        ...(diffs.length > 0 ? { fileDiffs: diffs.map((d) => ({ file: d.path, diff: d.diff })) } : {}),
      });
    }
    for (const w of [...(p.untouched ?? []), ...p.waiting]) problems.push(`${w.container}: ${w.reason}`);
    return { items, problems };
  };
  const actions = new DaemonActions({
    reconciler,
    exec,
    operations,
    definitions: () => definitions,
    reload: () => reload(),
  });
  const reloadWithGlobals = (globals: Record<string, unknown>): Promise<Record<string, unknown>> =>
    reload(globals);
  const version = packageVersion();
  let preflight: PreflightReport | undefined;
  const status = new DaemonStatus({
    reconciler,
    state,
    events,
    logs: engine,
    health,
    definitions: () => definitions.sets,
    version,
    instance: settings.instance,
    hostFacts: () => Promise.resolve({ hostname: hostname(), pid: process.pid, node: process.version }),
    preflight: () => preflight as unknown as Record<string, unknown> | undefined,
    definitionsError: () => loadError,
    plan: planView,
    configVersions: {
      files: (name, hash) => templateConfig.versionFiles(name, hash),
      secrets: () => templateConfig.secretSet(),
    },
  });
  const metrics = new MetricsRegistry();
  registerDaemonMetrics({
    registry: metrics,
    events,
    health,
    engineAvailable: () => reconciler.engineStatus().available,
    definitionsLoaded: () => loadError === undefined,
    quarantined: () => reconciler.quarantine.names().length,
  });
  health.onChange((c) =>
    events.publish({
      type: 'health',
      at: clock.now(),
      container: c.name,
      ...(c.check ? { check: c.check.name } : {}),
      status: c.status,
      ...(c.check?.lastResult ? { output: c.check.lastResult.output } : {}),
    }),
  );
  if (!loadError)
    log.info(
      { instance: settings.instance, containers: allContainers(definitions.sets).length, version },
      'definitions loaded',
    );
  return {
    settings,
    log,
    clock,
    events,
    engine,
    state,
    health,
    reconciler,
    status,
    actions,
    metrics,
    reloadWithGlobals,
    clusterGlobals: () => clusterGlobals,
    async prePull(images, operationId) {
      for (const image of new Set(images)) await resolveImage(exec, image, 'missing', operationId);
    },
    async start() {
      const report = await runPreflight({
        dockerInfo: () => engine.info().catch(() => undefined),
        stateDir: settings.stateDir,
        now: () => clock.now(),
        hypervisorSet: allContainers(definitions.sets).some((c) => c.role === 'hypervisor'),
      });
      preflight = report;
      if (!report.ok) {
        log.error(
          { blocking: report.blocking },
          `preflight blocks new containers: ${report.blocking.join(', ')}`,
        );
        reconciler.blockCreates(report.blocking.join(', '));
      } else {
        log.info({ warnings: report.checks.filter((c) => !c.ok).map((c) => c.name) }, 'preflight passed');
      }
      let desired: Awaited<ReturnType<typeof computeDesired>> = [];
      if (!loadError) {
        try {
          desired = await computeDesired();
        } catch (err) {
          loadError = toSpcdError(err);
        }
      }
      if (loadError) {
        const e = loadError;
        process.stderr.write(`spcd: definitions not loaded, holding what runs: ${describeStartupError(e)}\n`);
        log.error(
          { code: e.code, problems: e.details.problems, err: describeStartupError(e) },
          'definitions not loaded: holding the running containers (restarting exits, changing nothing) until a reload reads them',
        );
        reconciler.holdRunning({ reason: e.message, derive: (observed) => heldContainers(observed, state) });
      }
      await reconciler.start(desired);
    },
    async stop() {
      reloadRetry.close();
      await reconciler.stop();
      // Kills the execs of checks in flight and waits for them.
      await health.close();
    },
  };
}

export function describeStartupError(err: unknown): string {
  const e = err instanceof SpcdError ? err : toSpcdError(err);
  const problems =
    (e.details.problems as { file: string; line: number; path: string; message: string }[] | undefined) ?? [];
  if (problems.length === 0) return `${e.code}: ${e.message}`;
  return [
    `${e.code}: ${problems.length} problem(s) in the definitions:`,
    ...problems.map((p) => `  ${p.file}:${p.line}: ${p.path}: ${p.message}`),
  ].join('\n');
}
