import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DockerEngine } from '../../agent/engine/docker.js';
import { registryAuthFromFile } from '../../agent/host/registry-auth.js';
import { MountPreparer, NO_CONFIG } from '../../agent/config/preparer.js';
import { CgroupExitWatch } from '../../agent/host/exit-watch.js';
import { ProcVmProbe } from '../../agent/host/vm-probe.js';
import { noFailpoint } from '../../agent/executor/failpoint.js';
import type { ExecutorDeps } from '../../agent/executor/ports.js';
import { createContainer } from '../../agent/executor/simple.js';
import { upgradeContainer, type UpgradeRequest, type UpgradeResult } from '../../agent/executor/upgrade.js';
import { HealthManager } from '../../agent/health/manager.js';
import { HealthSync } from '../../agent/reconciler/health-sync.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import { pickPrimary } from '../../agent/planner/plan.js';
import { loadDesired } from '../../agent/spec/load.js';
import { Journal } from '../../agent/state/journal.js';
import { StateStore } from '../../agent/state/store.js';
import { REPO } from './daemon.js';
import { DOCKER_SOCKET } from './docker.js';
import { ALLOW_ALL } from '../../agent/model/image-policy.js';

/**
 * The executor in-process against the real engine: real DockerEngine,
 * StateStore and Journal in a temp dir, the real HealthManager as the gate,
 * the real /proc VM probe. Specs are loaded from YAML through spec/ like the
 * daemon does, so they are validated and normalized.
 */
export class UpgradeHarness {
  readonly events = new EventBus();
  readonly seen: SpcdEvent[] = [];
  readonly deps: ExecutorDeps;
  readonly engine: DockerEngine;
  readonly state: StateStore;
  readonly journal: Journal;
  readonly health: HealthManager;
  /** The owner of health watches that the executor and a reconciler share. */
  readonly healthSync: HealthSync;
  private op = 0;

  private constructor(
    readonly root: string,
    readonly instance: string,
    opts: { registryAuthFile?: string; gateDeadlineMs?: number; minReadyMs?: number },
    state: StateStore,
    journal: Journal,
  ) {
    const log = silentLogger();
    this.engine = new DockerEngine({ socketPath: DOCKER_SOCKET, log });
    this.state = state;
    this.journal = journal;
    this.health = new HealthManager({ exec: this.engine, clock: systemClock, log });
    this.healthSync = new HealthSync(this.health, systemClock);
    this.events.subscribe((e) => this.seen.push(e));
    this.deps = {
      engine: this.engine,
      state,
      journal,
      health: this.healthSync,
      preparer: new MountPreparer(join(REPO, 'healthchecks'), NO_CONFIG),
      vms: new ProcVmProbe(),
      exits: new CgroupExitWatch(systemClock),
      events: this.events,
      log,
      clock: systemClock,
      failpoint: noFailpoint,
      instance,
      gateDeadlineMs: opts.gateDeadlineMs ?? 15_000,
      minReadyMs: opts.minReadyMs ?? 300,
      pullActivityTimeoutMs: 10_000,
      registryAuth: registryAuthFromFile(opts.registryAuthFile),
      imagePolicy: ALLOW_ALL,
    };
  }

  static async create(
    prefix: string,
    opts: { registryAuthFile?: string; gateDeadlineMs?: number; minReadyMs?: number } = {},
  ): Promise<UpgradeHarness> {
    const root = mkdtempSync(join(tmpdir(), `spcd-${prefix}-`));
    const instance = `t-${prefix}-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
    const state = new StateStore(join(root, 'state'));
    await state.load();
    const journal = new Journal(join(root, 'state'));
    await journal.init();
    return new UpgradeHarness(root, instance, opts, state, journal);
  }

  /** A different registry auth file for the next pulls. */
  withAuthFile(file: string | undefined): void {
    (this.deps as { registryAuth: ExecutorDeps['registryAuth'] }).registryAuth = registryAuthFromFile(file);
  }

  /** Loads one container's YAML body (the mapping under its name) through spec/. */
  async spec(name: string, body: string, override?: string): Promise<ContainerSpec> {
    const dir = mkdtempSync(join(this.root, 'sets-'));
    mkdirSync(dir, { recursive: true });
    const indented = body
      .trim()
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n');
    writeFileSync(join(dir, 'set.yaml'), `set: upg\ncontainers:\n  ${name}:\n${indented}\n`);
    let overridesFile: string | undefined;
    if (override) {
      overridesFile = join(dir, 'overrides.yaml');
      writeFileSync(overridesFile, override);
    }
    const desired = await loadDesired({
      setsDir: dir,
      checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
      ...(overridesFile ? { overridesFile } : {}),
    });
    const spec = allContainers(desired.sets)[0];
    if (!spec) throw new Error('no container in the test set');
    return spec;
  }

  nextOp(): string {
    this.op += 1;
    return `test-op-${this.op}`;
  }

  /** First creation (generation 1), as the reconciler does. */
  async createFirst(spec: ContainerSpec): Promise<string> {
    return createContainer(this.deps, { spec, specHash: specHash(spec), configHash: 'none' }, this.nextOp());
  }

  async instances(name: string): Promise<ObservedContainer[]> {
    return (await this.engine.listManaged(this.instance)).filter((o) => o.identity.container === name);
  }

  async current(name: string): Promise<ObservedContainer | undefined> {
    return pickPrimary(name, await this.instances(name));
  }

  async upgrade(
    spec: ContainerSpec,
    opts: Partial<Omit<UpgradeRequest, 'spec' | 'specHash' | 'current' | 'operationId'>> = {},
  ): Promise<UpgradeResult> {
    return upgradeContainer(this.deps, {
      operationId: this.nextOp(),
      kind: 'upgrade',
      spec,
      specHash: specHash(spec),
      current: await this.current(spec.name),
      pull: 'missing',
      reason: 'test',
      ...opts,
    });
  }

  journalFiles(): string[] {
    return readdirSync(join(this.root, 'state', 'journal')).filter((f) => !f.startsWith('.'));
  }

  async close(): Promise<void> {
    await this.health.close();
  }
}
