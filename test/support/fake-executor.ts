import { adoptedIdentities } from '../../agent/state/adopted.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SpcdError } from '../../agent/errors.js';
import type {
  ExecutorDeps,
  HealthGate,
  Preparer,
  PreparedExtras,
  VmProbe,
  WatchedSpec,
} from '../../agent/executor/ports.js';
import { createContainer } from '../../agent/executor/simple.js';
import { silentLogger } from '../../agent/log.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { nodeStateFs, type StateFs } from '../../agent/state/atomic.js';
import { Journal, type JournalEntry } from '../../agent/state/journal.js';
import { StateStore } from '../../agent/state/store.js';
import { FakeClock } from './fake-clock.js';
import { FakeEngine } from './fake-engine.js';
import { ALLOW_ALL } from '../../agent/model/image-policy.js';

/** The health gate in memory: every gate passes unless `verdict` says otherwise. */
export class FakeHealthGate implements HealthGate {
  readonly watched = new Map<string, string>();
  readonly paused = new Set<string>();
  /** What waitHealthy answers for a container id: undefined passes; an error fails the gate. */
  verdict: (name: string, containerId: string) => SpcdError | undefined = () => undefined;

  pause(name: string): void {
    this.paused.add(name);
  }

  resume(name: string): void {
    this.paused.delete(name);
  }

  watchInstance(spec: WatchedSpec, c: ObservedContainer): void {
    this.watched.set(spec.name, c.id);
  }

  unwatch(name: string): void {
    this.watched.delete(name);
  }

  async waitHealthy(name: string, containerId: string): Promise<void> {
    const e = this.verdict(name, containerId);
    if (e) throw e;
  }
}

/** Config rendering is another room's business: every generation gets config 'none'. */
export class FakePreparer implements Preparer {
  readonly restored: string[] = [];

  async prepare(): Promise<PreparedExtras> {
    return { extraBinds: [], extraEnv: {}, configHash: 'none' };
  }

  async restore(name: string, configHash: string): Promise<boolean> {
    this.restored.push(`${name}:${configHash}`);
    return true;
  }
}

export class NoVms implements VmProbe {
  async runningVms(): Promise<readonly { pid: number; name: string }[]> {
    return [];
  }
}

/** Thrown by a failpoint: the process "dies" there (see FakeEngine.processKilled). */
export class Killed extends Error {
  constructor(readonly point: string) {
    super(`killed at ${point}`);
  }
}

export const INSTANCE = 'unit';

/**
 * The journal of one fake process: once that process is dead (its engine
 * killed, or the next process started), its writes never return, as a
 * SIGKILLed process writes nothing more. (A failpoint's Killed is thrown, so
 * the dead process's code may go on into its rollback.)
 */
class ProcessJournal extends Journal {
  constructor(
    stateDir: string,
    private readonly dead: () => boolean,
  ) {
    super(stateDir);
  }

  override async write(entry: JournalEntry): Promise<void> {
    if (this.dead()) await new Promise<never>(() => undefined);
    await super.write(entry);
  }

  override async clear(container: string): Promise<void> {
    if (this.dead()) await new Promise<never>(() => undefined);
    await super.clear(container);
  }
}

/** The real file system for state.json, except that while `full` every write fails as a full disk fails it. */
export class FillableStateFs implements StateFs {
  full = false;
  ensureDir = nodeStateFs.ensureDir;
  readJsonFile = nodeStateFs.readJsonFile;
  moveAside = nodeStateFs.moveAside;

  async writeFileAtomic(path: string, data: string): Promise<void> {
    if (this.full)
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
        code: 'ENOSPC',
        errno: -28,
      });
    await nodeStateFs.writeFileAtomic(path, data);
  }
}

/**
 * One spcd process over a FakeEngine, with real state and journal files in a
 * temporary directory (they are what survives a crash). `restart()` is the
 * next spcd: the same engine and directory, new objects.
 */
export class FakeProcess {
  readonly events: SpcdEvent[] = [];
  readonly bus = new EventBus();
  readonly health = new FakeHealthGate();
  readonly preparer = new FakePreparer();
  deps!: ExecutorDeps;
  /** SIGKILL at this failpoint (the engine stops answering this process). */
  killAt: string | undefined;
  /** Called at every failpoint the executor passes (before killAt strikes). */
  onFailpoint: ((point: string) => void) | undefined;
  /** state.json's file system: `stateFs.full = true` fills the disk. */
  readonly stateFs = new FillableStateFs();
  /** The next process started: this one is dead for good. */
  private superseded = false;

  private constructor(
    readonly dir: string,
    readonly engine: FakeEngine,
    readonly clock: FakeClock,
  ) {
    this.bus.subscribe((e) => this.events.push(e));
  }

  static async create(engine?: FakeEngine, clock = new FakeClock()): Promise<FakeProcess> {
    const dir = await mkdtemp(join(tmpdir(), 'spcd-unit-'));
    const p = new FakeProcess(dir, engine ?? new FakeEngine(clock), clock);
    await p.open();
    return p;
  }

  /** The next spcd after this one died: same engine (revived), same state directory. */
  async restart(): Promise<FakeProcess> {
    this.superseded = true;
    this.engine.revive();
    const p = new FakeProcess(this.dir, this.engine, this.clock);
    await p.open();
    return p;
  }

  private async open(): Promise<void> {
    const state = new StateStore(join(this.dir, 'state'), this.stateFs);
    await state.load(new Date(this.clock.now()));
    const journal = new ProcessJournal(
      join(this.dir, 'state'),
      () => this.superseded || this.engine.killed(),
    );
    await journal.init();
    // As the daemon wires it: adopted containers are listed with the identity their record gives them.
    this.engine.adopted = () => adoptedIdentities(state, INSTANCE);
    this.deps = {
      engine: this.engine,
      state,
      journal,
      health: this.health,
      preparer: this.preparer,
      vms: new NoVms(),
      events: this.bus,
      log: silentLogger(),
      clock: this.clock,
      failpoint: (point) => {
        this.onFailpoint?.(point);
        if (point !== this.killAt) return;
        this.engine.processKilled();
        throw new Killed(point);
      },
      instance: INSTANCE,
      gateDeadlineMs: 10_000,
      minReadyMs: 0,
      pullActivityTimeoutMs: 10_000,
      registryAuth: async () => undefined,
      imagePolicy: ALLOW_ALL,
    };
  }

  /** Creates and starts generation 1 of the spec (its image added to the engine). */
  async first(spec: ContainerSpec): Promise<ObservedContainer> {
    this.engine.addImage(spec.image);
    const id = await createContainer(
      this.deps,
      { spec, specHash: specHash(spec), configHash: 'none' },
      'op-first',
    );
    const o = await this.engine.inspect(id);
    if (!o) throw new Error('created container is gone');
    return o;
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
