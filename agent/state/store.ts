import { join } from 'node:path';
import { SpcdError, isSpcdError } from '../errors.js';
import type { AdoptionRecord } from '../model/adoption.js';
import type { ContainerSpec } from '../model/spec.js';
import { nodeStateFs, writeFailed, type StateFs } from './atomic.js';
import { parseStateFile, type StateFile } from './parse.js';
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
  readonly outcome: GenerationOutcome;
  readonly reason?: string;
  /** For a rollback or re-apply: the generation whose spec it reused. */
  readonly from?: number;
  /** The full spec, so a rollback can re-create exactly this generation. */
  readonly spec: ContainerSpec;
  /**
   * Each rendered config file (config.json included) and the sha256 of its
   * content, as written for this generation. Absent in generations recorded
   * by an older spcd and in containers without config.
   */
  readonly configFiles?: readonly ConfigFileDigest[];
  /** Output of bootstrap tasks run for this generation. */
  readonly bootstrap?: { name: string; exitCode: number | null; output: string }[];
}

/** One rendered config file of a generation: its path in the config directory and its content's sha256. */
export interface ConfigFileDigest {
  readonly path: string;
  readonly sha256: string;
}

export interface ContainerRecord {
  /** The next generation number to hand out. Never decreases. */
  readonly nextGeneration: number;
  /** The last generation that passed its health gate. */
  readonly lastKnownGood: number | null;
  /** Stopped by the operator: it stays stopped, across spcd's own restarts (the field's name is the state file's). */
  readonly heldStopped: boolean;
  readonly generations: readonly GenerationRecord[];
  /**
   * An operator's upgrade or rollback pins the spec it applied, so the
   * definitions on disk do not undo it. The pin drops when the definition of
   * that container changes on disk (newer intent), see planner/pins.ts.
   */
  readonly pin?: { spec: ContainerSpec; definitionHash: string } | undefined;
  /**
   * The last upgrade target that failed and was rolled back. The reconciler
   * does not retry it while the desired spec and config hashes are these;
   * any commit clears it.
   */
  readonly failedTarget?: FailedTarget | undefined;
  /**
   * The container of the current generation carries no labels: the operator
   * adopted it (docs/decisions/0045-adoption-record.md). Dropped when a
   * labelled generation commits, or on release.
   */
  readonly adopted?: AdoptionRecord | undefined;
}

export interface FailedTarget {
  readonly specHash: string;
  readonly configHash: string;
  readonly generation: number;
}

/** What spcd found of one container on the engine, to rebuild a lost state file from. */
export interface RebuiltContainer {
  readonly name: string;
  /** The highest generation any container of that name carries (parked, staging, tasks included). */
  readonly maxGeneration: number;
  /** The generation running now: it becomes the last known good. */
  readonly runningGeneration?: number;
  /** Its record, when its spec is known (the definition on disk has its spec hash). */
  readonly running?: Omit<GenerationRecord, 'outcome' | 'reason' | 'from' | 'bootstrap'>;
}

/** The state file could not be used at start-up: what was done about it (shown in status). */
export interface StateRecovery {
  readonly at: string;
  readonly reason: string;
  /** Where the unusable file was kept; null when it could not be moved. */
  readonly movedTo: string | null;
  /** Containers whose generation and last known good were rebuilt from container labels. */
  readonly rebuilt: readonly string[];
  /** Set when the rebuilt state could not be written yet (it is retried on the next change). */
  readonly rebuildError?: string;
}

const HISTORY = 20;
const FRESH: ContainerRecord = {
  nextGeneration: 1,
  lastKnownGood: null,
  heldStopped: false,
  generations: [],
};

/**
 * spcd's persisted knowledge, one JSON file written atomically. Every change
 * is computed on a copy, written (temp, fsync, rename, fsync dir) and only
 * then becomes what spcd believes: a failed write leaves memory as it was and
 * the caller gets STATE_WRITE_FAILED, so a retry really retries. Generations
 * are allocated (and persisted) before a container is created, so a number is
 * never reused even across a crash.
 */
export class StateStore {
  private data: StateFile = { version: 1, containers: {} };
  private readonly serial = new Serial();
  private readonly path: string;
  private recovered: StateRecovery | undefined;
  private rebuildPending = false;
  /** Generation numbers seen on the engine: never handed out again, even before they are persisted. */
  private readonly floors = new Map<string, number>();

  constructor(
    private readonly dir: string,
    private readonly fs: StateFs = nodeStateFs,
  ) {
    this.path = join(dir, 'state.json');
  }

  /**
   * Reads state.json. A file that cannot be read or parsed does not stop
   * spcd: it is moved aside (state.json.corrupt-<time>, kept), spcd starts
   * from an empty state, and needsRebuild() tells the caller to rebuild
   * generations from the engine's labels.
   */
  async load(now: Date = new Date()): Promise<StateRecovery | undefined> {
    await this.fs.ensureDir(this.dir);
    try {
      const raw = await this.fs.readJsonFile(this.path);
      if (raw !== undefined) this.data = parseStateFile(raw, this.path);
      return undefined;
    } catch (err) {
      if (!isSpcdError(err, 'STATE_CORRUPT')) throw err;
      const at = now.toISOString();
      const to = `${this.path}.corrupt-${at.replace(/[:.]/g, '-')}`;
      let movedTo: string | null = to;
      await this.fs.moveAside(this.path, to).catch(() => (movedTo = null));
      this.data = { version: 1, containers: {} };
      this.recovered = { at, reason: err.message, movedTo, rebuilt: [] };
      this.rebuildPending = true;
      return this.recovered;
    }
  }

  /** Set when start-up found the state file unusable (see load). */
  recovery(): StateRecovery | undefined {
    return this.recovered;
  }

  needsRebuild(): boolean {
    return this.rebuildPending;
  }

  record(name: string): ContainerRecord | undefined {
    return this.data.containers[name];
  }

  names(): string[] {
    return Object.keys(this.data.containers);
  }

  generation(name: string, generation: number): GenerationRecord | undefined {
    return this.data.containers[name]?.generations.find((g) => g.generation === generation);
  }

  /** Makes sure numbers seen on the engine (e.g. after a lost state dir) are never handed out again. */
  async observeGeneration(name: string, generation: number): Promise<void> {
    this.raiseFloor(name, generation);
    await this.update(name, (r) =>
      r.nextGeneration > generation ? undefined : { ...r, nextGeneration: generation + 1 },
    );
  }

  /**
   * After load() set a bad file aside: records what the engine's labels say,
   * in one write. Numbers are reserved in memory first (they only ever grow),
   * so even if this write fails no generation number is handed out twice.
   */
  async rebuild(found: readonly RebuiltContainer[], now: Date): Promise<void> {
    for (const f of found) this.raiseFloor(f.name, f.maxGeneration);
    this.rebuildPending = false;
    const names = found.map((f) => f.name);
    try {
      await this.change((data) => {
        const containers = { ...data.containers };
        for (const f of found) {
          const r = containers[f.name] ?? FRESH;
          const running = f.running
            ? [
                {
                  ...f.running,
                  outcome: 'current' as const,
                  reason: `rebuilt from labels at ${now.toISOString()}`,
                },
              ]
            : [];
          containers[f.name] = {
            ...r,
            nextGeneration: Math.max(r.nextGeneration, f.maxGeneration + 1),
            lastKnownGood: f.runningGeneration ?? r.lastKnownGood,
            generations: [
              ...r.generations.filter((g) => g.generation !== f.running?.generation),
              ...running,
            ].sort((a, b) => a.generation - b.generation),
          };
        }
        return { ...data, containers };
      });
      if (this.recovered) this.recovered = { ...this.recovered, rebuilt: names };
    } catch (err) {
      if (this.recovered)
        this.recovered = { ...this.recovered, rebuilt: names, rebuildError: (err as Error).message };
      throw err;
    }
  }

  /** Allocates the next generation and records it as in progress, persisted before returning. */
  async allocate(
    name: string,
    entry: Omit<GenerationRecord, 'generation' | 'outcome' | 'createdAt'>,
    now: Date,
  ): Promise<GenerationRecord> {
    let rec: GenerationRecord | undefined;
    await this.update(name, (r) => {
      const generation = Math.max(r.nextGeneration, (this.floors.get(name) ?? 0) + 1);
      rec = { ...entry, generation, createdAt: now.toISOString(), outcome: 'in-progress' };
      return trim({ ...r, nextGeneration: generation + 1, generations: [...r.generations, rec] });
    });
    if (!rec) throw new SpcdError('INTERNAL', `no generation allocated for ${name}`);
    return rec;
  }

  async setOutcome(
    name: string,
    generation: number,
    outcome: GenerationOutcome,
    reason?: string,
  ): Promise<void> {
    await this.updateGeneration(name, generation, (g) => ({
      ...g,
      outcome,
      ...(reason !== undefined ? { reason } : {}),
    }));
  }

  /** The generation passed its gate: it is current and last known good; the previous current is superseded. */
  async commit(name: string, generation: number): Promise<void> {
    await this.update(name, (r) => ({
      ...r,
      lastKnownGood: generation,
      failedTarget: undefined,
      adopted: r.adopted?.generation === generation ? r.adopted : undefined,
      generations: r.generations.map((g) =>
        g.generation === generation
          ? { ...g, outcome: 'current' as const }
          : g.outcome === 'current'
            ? { ...g, outcome: 'superseded' as const }
            : g,
      ),
    }));
  }

  async setBootstrap(
    name: string,
    generation: number,
    results: GenerationRecord['bootstrap'],
  ): Promise<void> {
    await this.updateGeneration(name, generation, (g) => ({ ...g, bootstrap: results }));
  }

  async setOperatorStopped(name: string, stopped: boolean): Promise<void> {
    await this.update(name, (r) => (r.heldStopped === stopped ? undefined : { ...r, heldStopped: stopped }));
  }

  async setFailedTarget(name: string, target: FailedTarget | undefined): Promise<void> {
    await this.update(name, (r) =>
      r.failedTarget === undefined && target === undefined ? undefined : { ...r, failedTarget: target },
    );
  }

  async setPin(name: string, pin: ContainerRecord['pin']): Promise<void> {
    await this.update(name, (r) => (r.pin === undefined && pin === undefined ? undefined : { ...r, pin }));
  }

  /**
   * Adopts an unlabeled container as the next generation, current and last
   * known good, in one write: after a crash at any point it is either
   * adopted or not, never half.
   */
  async adopt(
    name: string,
    entry: Omit<GenerationRecord, 'generation' | 'outcome' | 'createdAt' | 'reason'>,
    adoption: Omit<AdoptionRecord, 'generation'>,
  ): Promise<AdoptionRecord> {
    let made: AdoptionRecord | undefined;
    await this.update(name, (r) => {
      const generation = Math.max(r.nextGeneration, (this.floors.get(name) ?? 0) + 1);
      made = { ...adoption, generation };
      const superseded = r.generations.map((g) =>
        g.outcome === 'current' ? { ...g, outcome: 'superseded' as const } : g,
      );
      const rec: GenerationRecord = {
        ...entry,
        generation,
        createdAt: adoption.adoptedAt,
        outcome: 'current',
        reason: `adopted ${adoption.id.slice(0, 12)} (${adoption.name}, started ${adoption.startedAt})`,
      };
      return trim({
        ...r,
        nextGeneration: generation + 1,
        lastKnownGood: generation,
        failedTarget: undefined,
        generations: [...superseded, rec],
        adopted: made,
      });
    });
    if (!made) throw new SpcdError('INTERNAL', `no adoption recorded for ${name}`);
    return made;
  }

  /** Gives an adopted container back: spcd forgets the adoption and leaves the container as it is. */
  async release(name: string): Promise<AdoptionRecord | undefined> {
    const was = this.record(name)?.adopted;
    if (!was) return undefined;
    await this.update(name, (r) => ({
      ...r,
      adopted: undefined,
      lastKnownGood: r.lastKnownGood === was.generation ? null : r.lastKnownGood,
      generations: r.generations.map((g) =>
        g.generation === was.generation ? { ...g, outcome: 'superseded' as const, reason: 'released' } : g,
      ),
    }));
    return was;
  }

  private raiseFloor(name: string, generation: number): void {
    if ((this.floors.get(name) ?? 0) < generation) this.floors.set(name, generation);
  }

  private updateGeneration(
    name: string,
    generation: number,
    change: (g: GenerationRecord) => GenerationRecord,
  ): Promise<void> {
    return this.update(name, (r) => {
      if (!r.generations.some((g) => g.generation === generation)) return undefined;
      return {
        ...r,
        generations: r.generations.map((g) => (g.generation === generation ? change(g) : g)),
      };
    });
  }

  /** One container's record changes; undefined from `change` means nothing to write. */
  private update(name: string, change: (r: ContainerRecord) => ContainerRecord | undefined): Promise<void> {
    return this.change((data) => {
      const next = change(data.containers[name] ?? FRESH);
      return next && { ...data, containers: { ...data.containers, [name]: next } };
    });
  }

  /**
   * The only way the state changes: computed from the state as last written
   * (changes queue one after another), written atomically, then swapped in.
   */
  private change(compute: (data: StateFile) => StateFile | undefined): Promise<void> {
    return this.serial.run(async () => {
      const next = compute(this.data);
      if (!next) return;
      try {
        await this.fs.writeFileAtomic(this.path, JSON.stringify(next, null, 1));
      } catch (err) {
        throw writeFailed(this.path, err);
      }
      this.data = next;
    });
  }
}

function trim(r: ContainerRecord): ContainerRecord {
  if (r.generations.length <= HISTORY) return r;
  // Keep the last known good whatever its age: it is the rollback target.
  const keep = r.generations.slice(-HISTORY);
  const lkg = r.generations.find((g) => g.generation === r.lastKnownGood);
  if (lkg && !keep.includes(lkg)) keep.unshift(lkg);
  return { ...r, generations: keep };
}
