/**
 * The definitions in force and the values they render with: read at
 * start-up, replaced by a reload (with the desired ConfigMap's globals in a
 * cluster), nothing half-applied. Definitions or values that cannot be read
 * do not stop spcd: `error` says why they are not in force, and the first
 * reload that reads them cleanly applies them.
 */
import { join } from 'node:path';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { RetriesEnded } from '../model/operation.js';
import type { DesiredState } from '../model/spec.js';
import type { DesiredContainer, Plan } from '../planner/types.js';
import { loadDesired } from '../spec/load.js';
import { assertTrustedInputs } from '../spec/trusted-paths.js';
import { readClusterGlobals, writeClusterGlobals } from './cluster-globals.js';
import { ReloadRetry } from './reload-retry.js';
import type { TemplateConfig } from './template-config.js';

/** Where the definitions and their value files are (the daemon's settings). */
export interface DefinitionPaths {
  readonly setsDir: string;
  readonly overridesFile?: string | undefined;
  readonly templatesDir: string;
  readonly healthchecksDir: string;
  readonly stateDir: string;
  /** Where rendered config lives: checked like the inputs, since containers mount what is in it. */
  readonly configRoot?: string | undefined;
}

/** Loads the definitions, turning any problem into one typed error (nothing half-applied). */
export async function loadDefinitions(paths: DefinitionPaths): Promise<DesiredState> {
  // Whoever can write these is root on the host: refuse them unless only root can (docs/explanation/security.md).
  await assertTrustedInputs(paths);
  return loadDesired({
    setsDir: paths.setsDir,
    ...(paths.overridesFile ? { overridesFile: paths.overridesFile } : {}),
    checkLibraryFile: join(paths.healthchecksDir, 'library.yaml'),
  });
}

/** What a reload hands its result to (the reconciler, through the daemon's wiring). */
export interface DefinitionsTarget {
  /** The desired containers of the definitions now in force. */
  desired(): Promise<DesiredContainer[]>;
  preview(desired: readonly DesiredContainer[]): Plan;
  setDesired(desired: DesiredContainer[]): void;
  /** Tries each quarantined container again; those still quarantined, and the retries' operations. */
  retryQuarantined(): Promise<RetriesEnded>;
}

export interface DefinitionsDeps {
  readonly paths: DefinitionPaths;
  readonly config: TemplateConfig;
  readonly target: DefinitionsTarget;
  readonly events: EventBus;
  readonly clock: Clock;
  readonly log: Logger;
}

/** The definitions and values on disk now, read without applying them, and what kept them from being read. */
export interface DefinitionsPreview {
  readonly sets: DesiredState;
  readonly config: TemplateConfig;
  readonly problems: readonly string[];
}

const NO_DEFINITIONS: DesiredState = { sets: [] };

export class Definitions {
  private sets: DesiredState = NO_DEFINITIONS;
  /** Why the definitions are not in force (spcd keeps what runs); undefined once they are. */
  private loadError: SpcdError | undefined;
  /** The desired ConfigMap's globals last applied (kube-wiring.ts), kept across restarts; {} outside a cluster. */
  private globals: Record<string, unknown> = {};
  private opened = false;
  // A reload that failed on a full or failing disk is tried again by itself (SIGHUP has no one to tell).
  private retryGlobals: Record<string, unknown> | undefined;
  private readonly retry: ReloadRetry;

  constructor(private readonly d: DefinitionsDeps) {
    this.retry = new ReloadRetry(d.clock, d.log.child({ room: 'reload' }), () =>
      this.reload(this.retryGlobals),
    );
  }

  get current(): DesiredState {
    return this.sets;
  }

  get error(): SpcdError | undefined {
    return this.loadError;
  }

  /** The cluster globals in force (last applied, kept across restarts). */
  clusterGlobals(): Record<string, unknown> {
    return this.globals;
  }

  /** Start-up: reads the cluster globals kept, the definitions and their values. Never throws for bad input. */
  async open(): Promise<void> {
    try {
      this.globals = await readClusterGlobals(this.d.paths.stateDir);
    } catch (err) {
      // The ConfigMap delivers them again once the kube integration runs.
      this.d.log.error(
        { code: toSpcdError(err).code, err: (err as Error).message },
        'cluster globals unreadable; ignored',
      );
    }
    try {
      const read = await loadDefinitions(this.d.paths);
      await this.d.config.load(read, this.globals);
      this.sets = read;
    } catch (err) {
      this.loadError = toSpcdError(err);
    }
    this.opened = true;
  }

  /** The definitions read could not be turned into desired containers: they are not in force. */
  notInForce(err: unknown): void {
    this.loadError = toSpcdError(err);
  }

  /** Stops a retry still waiting. */
  close(): void {
    this.retry.close();
  }

  /** Re-reads the definitions (with these cluster globals, else the ones in force) and applies them. */
  async reload(nextGlobals?: Record<string, unknown>): Promise<Record<string, unknown>> {
    // Start-up reads them; before that there is nothing to reload.
    if (!this.opened)
      throw new SpcdError('DEFINITIONS_NOT_LOADED', 'definitions not read yet: spcd is starting');
    this.retry.begin();
    try {
      const answer = await this.reloadOnce(nextGlobals);
      this.retry.succeeded();
      return answer;
    } catch (err) {
      this.retryGlobals = nextGlobals;
      this.retry.failed(toSpcdError(err).code);
      throw err;
    }
  }

  private failed(err: unknown): SpcdError {
    const e = toSpcdError(err);
    if (this.loadError) this.loadError = e;
    this.d.events.publish({ type: 'reload', at: this.d.clock.now(), ok: false, detail: e.message });
    return e;
  }

  private async reloadOnce(nextGlobals?: Record<string, unknown>): Promise<Record<string, unknown>> {
    const { config, target, paths } = this.d;
    const globalsNext = nextGlobals ?? this.globals;
    let next: DesiredState;
    try {
      next = await loadDefinitions(paths);
    } catch (err) {
      throw this.failed(err);
    }
    const previous = this.sets;
    let desired: DesiredContainer[];
    try {
      await config.load(next, globalsNext);
      this.sets = next;
      desired = await target.desired();
      if (nextGlobals) await writeClusterGlobals(paths.stateDir, nextGlobals);
    } catch (err) {
      // Nothing half-applied: the old definitions and values stay in force.
      this.sets = previous;
      await config.load(previous, this.globals).catch(() => undefined);
      throw this.failed(err);
    }
    this.globals = globalsNext;
    const plan = target.preview(desired);
    target.setDesired(desired);
    if (this.loadError)
      this.d.log.info('definitions read cleanly: applying them instead of keeping what runs');
    this.loadError = undefined;
    // A reload is also how an operator clears a quarantine (docs/how-to/recover-from-a-failed-upgrade.md): each is tried again.
    const { quarantined, operations } = await target.retryQuarantined();
    this.d.events.publish({
      type: 'reload',
      at: this.d.clock.now(),
      ok: true,
      detail: `${desired.length} containers`,
    });
    return {
      containers: desired.length,
      changes: plan.steps.map((s) => ({ kind: s.kind, reason: s.reason })),
      ...(quarantined.length > 0 ? { quarantined } : {}),
      // What it caused that can be followed by id: the retries' `recover` operations, each ended. The
      // steps a pass plans from the new definitions begin after this answer (docs/architecture.md).
      operations,
    };
  }

  /** The definitions and values as they are on disk now, for a preview; the ones in force when unreadable. */
  async preview(): Promise<DefinitionsPreview> {
    const problems: string[] = [];
    let sets = this.sets;
    const config = this.d.config.fork();
    try {
      sets = await loadDefinitions(this.d.paths);
      await config.load(sets, this.globals);
    } catch (err) {
      problems.push(toSpcdError(err).message);
      sets = this.sets;
      await config.load(this.sets, this.globals).catch(() => undefined);
    }
    return { sets, config, problems };
  }
}
