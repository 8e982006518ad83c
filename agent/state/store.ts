import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import type { ContainerSpec } from '../model/spec.js';
import { ensureDir, readJsonFile, writeFileAtomic } from './atomic.js';
import { Serial } from './serial.js';

export type GenerationOutcome =
  'current' | 'committed' | 'rolled-back' | 'failed' | 'superseded' | 'in-progress';

export interface GenerationRecord {
  readonly generation: number;
  readonly image: string;
  readonly imageDigest: string | null;
  readonly specHash: string;
  readonly configHash: string;
  readonly createdAt: string;
  outcome: GenerationOutcome;
  reason?: string;
  /** For a rollback or re-apply: the generation whose spec it reused. */
  readonly from?: number;
  /** The full spec, so a rollback can re-create exactly this generation. */
  readonly spec: ContainerSpec;
  /** Output of bootstrap tasks run for this generation. */
  bootstrap?: { name: string; exitCode: number | null; output: string }[];
}

export interface ContainerRecord {
  /** The next generation number to hand out. Never decreases. */
  nextGeneration: number;
  /** The last generation that passed its health gate. */
  lastKnownGood: number | null;
  /** An operator stopped it: spcd keeps it stopped, across its own restarts. */
  heldStopped: boolean;
  generations: GenerationRecord[];
  /**
   * An operator's upgrade or rollback pins the spec it applied, so the
   * definitions on disk do not undo it. The pin drops when the definition of
   * that container changes on disk (newer intent), see daemon/desired.ts.
   */
  pin?: { spec: ContainerSpec; definitionHash: string } | undefined;
  /**
   * The last upgrade target that failed and was rolled back. The reconciler
   * does not retry it while the desired spec and config hashes are these;
   * any commit clears it.
   */
  failedTarget?: FailedTarget | undefined;
}

export interface FailedTarget {
  readonly specHash: string;
  readonly configHash: string;
  readonly generation: number;
}

interface StateFile {
  readonly version: 1;
  containers: Record<string, ContainerRecord>;
}

const HISTORY = 20;

/**
 * spcd's persisted knowledge, one JSON file written atomically. Generations
 * are allocated (and persisted) before a container is created, so a number is
 * never reused even across a crash.
 */
export class StateStore {
  private data: StateFile = { version: 1, containers: {} };
  private readonly serial = new Serial();
  private readonly path: string;

  constructor(private readonly dir: string) {
    this.path = join(dir, 'state.json');
  }

  async load(): Promise<void> {
    await ensureDir(this.dir);
    const raw = await readJsonFile(this.path);
    if (raw === undefined) return;
    if (typeof raw !== 'object' || raw === null || (raw as { version?: unknown }).version !== 1) {
      throw new SpcdError('STATE_CORRUPT', `${this.path}: unknown state format`, { path: this.path });
    }
    this.data = raw as StateFile;
  }

  record(name: string): ContainerRecord | undefined {
    return this.data.containers[name];
  }

  names(): string[] {
    return Object.keys(this.data.containers);
  }

  private ensure(name: string): ContainerRecord {
    let r = this.data.containers[name];
    if (!r) {
      r = { nextGeneration: 1, lastKnownGood: null, heldStopped: false, generations: [] };
      this.data.containers[name] = r;
    }
    return r;
  }

  /** Makes sure numbers seen on the engine (e.g. after a lost state dir) are never handed out again. */
  async observeGeneration(name: string, generation: number): Promise<void> {
    const r = this.ensure(name);
    if (r.nextGeneration > generation) return;
    r.nextGeneration = generation + 1;
    await this.flush();
  }

  /** Allocates the next generation and records it as in progress, persisted before returning. */
  async allocate(
    name: string,
    entry: Omit<GenerationRecord, 'generation' | 'outcome' | 'createdAt'>,
    now: Date,
  ): Promise<GenerationRecord> {
    const r = this.ensure(name);
    const rec: GenerationRecord = {
      ...entry,
      generation: r.nextGeneration,
      createdAt: now.toISOString(),
      outcome: 'in-progress',
    };
    r.nextGeneration += 1;
    r.generations.push(rec);
    this.trim(r);
    await this.flush();
    return rec;
  }

  async setOutcome(
    name: string,
    generation: number,
    outcome: GenerationOutcome,
    reason?: string,
  ): Promise<void> {
    const r = this.ensure(name);
    const g = r.generations.find((x) => x.generation === generation);
    if (!g) return;
    g.outcome = outcome;
    if (reason !== undefined) g.reason = reason;
    await this.flush();
  }

  /** The generation passed its gate: it is current and last known good; the previous current is superseded. */
  async commit(name: string, generation: number): Promise<void> {
    const r = this.ensure(name);
    for (const g of r.generations) {
      if (g.generation === generation) g.outcome = 'current';
      else if (g.outcome === 'current') g.outcome = 'superseded';
    }
    r.lastKnownGood = generation;
    r.failedTarget = undefined;
    await this.flush();
  }

  async setBootstrap(
    name: string,
    generation: number,
    results: GenerationRecord['bootstrap'],
  ): Promise<void> {
    const g = this.ensure(name).generations.find((x) => x.generation === generation);
    if (!g) return;
    g.bootstrap = results;
    await this.flush();
  }

  async setHeldStopped(name: string, held: boolean): Promise<void> {
    const r = this.ensure(name);
    if (r.heldStopped === held) return;
    r.heldStopped = held;
    await this.flush();
  }

  async setFailedTarget(name: string, target: FailedTarget | undefined): Promise<void> {
    this.ensure(name).failedTarget = target;
    await this.flush();
  }

  async setPin(name: string, pin: ContainerRecord['pin']): Promise<void> {
    const r = this.ensure(name);
    r.pin = pin;
    await this.flush();
  }

  generation(name: string, generation: number): GenerationRecord | undefined {
    return this.data.containers[name]?.generations.find((g) => g.generation === generation);
  }

  private trim(r: ContainerRecord): void {
    if (r.generations.length <= HISTORY) return;
    // Keep the last known good whatever its age: it is the rollback target.
    const keep = r.generations.slice(-HISTORY);
    const lkg = r.generations.find((g) => g.generation === r.lastKnownGood);
    if (lkg && !keep.includes(lkg)) keep.unshift(lkg);
    r.generations = keep;
  }

  private flush(): Promise<void> {
    const text = JSON.stringify(this.data, null, 1);
    return this.serial.run(() => writeFileAtomic(this.path, text));
  }
}
