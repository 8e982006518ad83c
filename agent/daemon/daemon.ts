import { hostname } from 'node:os';
import { buildInfo } from '../version.js';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { systemClock, type Clock } from '../model/clock.js';
import { EventBus } from '../model/events.js';
import { adoptedIdentities } from '../state/adopted.js';
import { findUnlabeled } from '../reconciler/adoption-watch.js';
import { DockerEngine } from '../engine/docker.js';
import { HealthManager } from '../health/manager.js';
import { envFailpoint } from '../executor/failpoint.js';
import { imagePuller } from '../executor/pre-pull.js';
import { ALLOW_ALL, signedPrefixes, type ImagePolicy } from '../model/image-policy.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { HealthSync } from '../reconciler/health-sync.js';
import { Operations } from '../reconciler/operations.js';
import { Reconciler } from '../reconciler/reconciler.js';
import { Journal } from '../state/journal.js';
import { StateStore } from '../state/store.js';
import { MetricsRegistry } from '../api/registry.js';
import { Definitions } from '../config/definitions.js';
import { MountPreparer, type ConfigPort } from '../config/preparer.js';
import { TemplateConfig } from '../config/template-config.js';
import { registryAuthFromFile } from '../host/registry-auth.js';
import { SkopeoSignatureVerifier } from '../host/image-signature.js';
import { CgroupExitWatch } from '../host/exit-watch.js';
import { ProcVmProbe } from '../host/vm-probe.js';
import { SystemctlUnitProbe } from '../host/kolla-units.js';
import { publishHealthEvents } from '../status/health-events.js';
import { registerDaemonMetrics } from '../status/metrics.js';
import { planView } from '../status/plan-view.js';
import { DaemonStatus } from '../status/status-view.js';
import { DaemonActions } from './actions.js';
import { Converge } from './converge.js';
import { trackedPrePull, type TrackedPrePull } from './pre-pull-operation.js';
import { clearStalePins, desiredContainers, keptContainers } from '../planner/pins.js';
import type { Component } from './lifecycle.js';
import { startupComponents } from './components.js';
import type { Settings } from './settings.js';

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
  /** Makes these images present (pulled when missing) under an operation of their own, touching no container. */
  readonly prePull: TrackedPrePull;
}

/** package.json's version (agent/version.ts). */
export function packageVersion(): string {
  return buildInfo().version;
}

export type Daemon = DaemonParts & {
  /** Start-up in order (daemon/lifecycle.ts): each start opens, each stop closes, newest first. */
  readonly components: readonly Component[];
};

/**
 * The node's image policy, read by main.ts from --image-policy at start-up.
 * Without one every image is allowed, as before the policy existed, and spcd
 * says so.
 */
function imagePolicyOf(settings: Settings, given: ImagePolicy | undefined, log: Logger): ImagePolicy {
  if (settings.imagePolicyFile !== undefined && given === undefined)
    throw new SpcdError(
      'INTERNAL',
      `--image-policy ${settings.imagePolicyFile} was not read before the build`,
    );
  if (given === undefined || given.entries === undefined) {
    log.warn(
      'no --image-policy: this node runs any image it is asked for (the fleet channel, the API, the sets); see docs/explanation/security.md#image-policy',
    );
    return ALLOW_ALL;
  }
  log.info({ imagePolicy: given.source, allow: given.entries }, 'image policy in force');
  return given;
}

/**
 * Builds every room and wires them (the composition root's body). Nothing is
 * opened or started here, and nothing is awaited: `components` reads the
 * state, the journal and the definitions, serves the API, adopts, recovers
 * and converges, in that order.
 *
 * Definitions or values that cannot be read do not stop spcd: it keeps what
 * runs (restarting what exits, creating, replacing and removing nothing),
 * reports the problem in the status and the log, and applies the
 * definitions at the first reload that reads them cleanly.
 */
export function buildDaemon(settings: Settings, log: Logger, opts: BuildOptions = {}): Daemon {
  const core = buildCore(settings, log, opts);
  const control = buildControl(settings, log, core, opts.onHeartbeat);
  const version = packageVersion();
  const status = buildStatus(settings, core, control, version);
  const metrics = buildMetrics(core, control);
  const { clock, events, engine, state, health, exec, journal } = core;
  const puller = imagePuller(exec);
  const { reconciler, actions, definitions, converge } = control;
  publishHealthEvents(health, events, clock);
  const parts: DaemonParts = {
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
    reloadWithGlobals: (globals) => definitions.reload(globals),
    clusterGlobals: () => definitions.clusterGlobals(),
    prePull: trackedPrePull(puller, reconciler.operations),
  };
  const components = startupComponents({ parts, journal, definitions, converge, version });
  return { ...parts, components };
}

export interface BuildOptions {
  clock?: Clock;
  config?: ConfigPort;
  env?: NodeJS.ProcessEnv;
  onHeartbeat?: () => void;
  imagePolicy?: ImagePolicy;
}

/** The rooms that act on the engine and keep the state: what the reconciler and the status read. */
interface Core {
  readonly clock: Clock;
  readonly events: EventBus;
  readonly state: StateStore;
  readonly engine: DockerEngine;
  readonly journal: Journal;
  readonly templateConfig: TemplateConfig;
  readonly config: ConfigPort;
  readonly health: HealthManager;
  readonly healthSync: HealthSync;
  readonly exec: ExecutorDeps;
}

function buildCore(settings: Settings, log: Logger, opts: BuildOptions): Core {
  const clock = opts.clock ?? systemClock;
  const events = new EventBus();
  const state = new StateStore(settings.stateDir);
  const engine = new DockerEngine({
    socketPath: settings.dockerSocket,
    log: log.child({ room: 'engine' }),
    adopted: () => adoptedIdentities(state, settings.instance),
    ...(settings.engine ? { engine: settings.engine } : {}),
  });
  const journal = new Journal(settings.stateDir);
  const templateConfig = new TemplateConfig({
    templatesDir: settings.templatesDir,
    configRoot: settings.configRoot,
    files: { globalsFile: settings.globalsFile, secretsFile: settings.secretsFile },
    log: log.child({ room: 'render' }),
  });
  const config: ConfigPort = opts.config ?? templateConfig;
  const health = new HealthManager({ exec: engine, clock, log: log.child({ room: 'health' }) });
  // The only owner of health watches: the reconciler's passes and the executor's health gate.
  const healthSync = new HealthSync(health, clock);
  const imagePolicy = imagePolicyOf(settings, opts.imagePolicy, log);
  const exec: ExecutorDeps = {
    engine,
    state,
    journal,
    health: healthSync,
    preparer: new MountPreparer(settings.healthchecksDir, config),
    vms: new ProcVmProbe(),
    units: new SystemctlUnitProbe(settings.systemctl),
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
    imagePolicy,
    imageSignatures: new SkopeoSignatureVerifier(),
  };
  return { clock, events, state, engine, journal, templateConfig, config, health, healthSync, exec };
}

/** What converges the node: the reconciler, the definitions it is given, the operations and actions on it. */
interface Control {
  readonly reconciler: Reconciler;
  readonly definitions: Definitions;
  readonly actions: DaemonActions;
  readonly converge: Converge;
}

function buildControl(settings: Settings, log: Logger, core: Core, onHeartbeat?: () => void): Control {
  const { engine, exec, healthSync, events, clock, state, config, templateConfig } = core;
  const operations = new Operations({ events, clock, log: log.child({ room: 'operations' }) });
  const reconciler = new Reconciler({
    operations,
    engine,
    exec,
    health: healthSync,
    events,
    log: log.child({ room: 'reconciler' }),
    clock,
    instance: settings.instance,
    relistMs: settings.relistMs,
    ...(onHeartbeat ? { onHeartbeat } : {}),
  });
  const computeDesired = async (): Promise<ReturnType<typeof desiredContainers>> => {
    await clearStalePins(definitions.current, state);
    return desiredContainers(definitions.current, state, (s) => config.hash(s));
  };
  const definitions = new Definitions({
    paths: settings,
    config: templateConfig,
    target: {
      desired: computeDesired,
      preview: (desired) => reconciler.preview(desired),
      setDesired: (desired) => reconciler.setDesired(desired),
      retryQuarantined: () => reconciler.retryQuarantined(),
    },
    events,
    clock,
    log,
  });
  const actions = new DaemonActions({
    reconciler,
    exec,
    unlabeled: engine,
    operations,
    definitions: () => definitions.current,
    reload: () => definitions.reload(),
  });
  const converge = new Converge({
    engine,
    ...(settings.engine ? { expectedEngine: settings.engine } : {}),
    stateDir: settings.stateDir,
    signedPrefixes: signedPrefixes(exec.imagePolicy),
    clock,
    log,
    definitions,
    reconciler,
    computeDesired,
    kept: (observed) => keptContainers(observed, state),
  });
  return { reconciler, definitions, actions, converge };
}

function buildStatus(settings: Settings, core: Core, control: Control, version: string): DaemonStatus {
  const { state, events, engine, health, templateConfig } = core;
  const { reconciler, definitions, converge } = control;
  return new DaemonStatus({
    reconciler,
    state,
    events,
    logs: engine,
    health,
    definitions: () => definitions.current.sets,
    version,
    build: { commit: buildInfo().commit, date: buildInfo().date },
    instance: settings.instance,
    hostFacts: () => Promise.resolve({ hostname: hostname(), pid: process.pid, node: process.version }),
    preflight: () => converge.preflight as unknown as Record<string, unknown> | undefined,
    definitionsError: () => definitions.error,
    plan: () =>
      planView({
        preview: () => definitions.preview(),
        desiredOf: (sets, hash) => desiredContainers(sets, state, hash),
        reconciler,
        unlabeledOf: (desired) =>
          findUnlabeled(
            { engine, state, instance: settings.instance },
            reconciler.observedContainers(),
            desired,
          ),
      }),
    configVersions: {
      files: (name, hash) => templateConfig.versionFiles(name, hash),
      secrets: () => templateConfig.secretSet(),
    },
  });
}

function buildMetrics(core: Core, control: Control): MetricsRegistry {
  const { events, health } = core;
  const { reconciler, definitions } = control;
  const metrics = new MetricsRegistry();
  registerDaemonMetrics({
    registry: metrics,
    events,
    health,
    engineAvailable: () => reconciler.engineStatus().available,
    definitionsLoaded: () => definitions.error === undefined,
    quarantined: () => reconciler.quarantine.names().length,
  });
  return metrics;
}
