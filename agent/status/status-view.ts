import { SpcdError } from '../errors.js';
import type { EventBus } from '../model/events.js';
import { isRunning } from '../model/observed.js';
import { isDependencyCheck, type CheckSpec, type SetSpec } from '../model/spec.js';
import type {
  ContainerHealthView,
  ContainerState,
  ContainerStatus,
  DefinitionProblem,
  DefinitionsStatus,
  DependencyView,
  GenerationDiffView,
  GenerationView,
  HealthState,
  LogStreamOptions,
  PlanView,
  SetStatus,
  StatusDocument,
  StatusView,
} from '../api/types.js';
import type { LogEngine } from '../engine/types.js';
import type { HealthSnapshot } from '../health/types.js';
import type { Plan } from '../planner/types.js';
import { isUpgrade, type Reconciler } from '../reconciler/reconciler.js';
import type { StateStore } from '../state/store.js';
import { CensusLedger } from './census-ledger.js';
import { generationDiff, generationView, type ConfigVersions } from './generation-diff.js';

export interface StatusDeps {
  readonly reconciler: Reconciler;
  readonly state: StateStore;
  readonly events: EventBus;
  readonly logs: LogEngine;
  readonly health: { snapshot(name: string): HealthSnapshot | undefined };
  readonly definitions: () => readonly SetSpec[];
  readonly version: string;
  /** The git commit and build date of this spcd (agent/version.ts). */
  readonly build?: { readonly commit: string; readonly date: string };
  readonly instance: string;
  readonly hostFacts: () => Promise<Record<string, unknown>>;
  readonly preflight?: () => Record<string, unknown> | undefined;
  /** Why the definitions are not in force (spcd keeps what runs), if they are not. */
  readonly definitionsError?: () => SpcdError | undefined;
  readonly plan: () => Promise<PlanView>;
  /** The rendered config versions kept on disk, for the content diffs of generationDiff. */
  readonly configVersions?: ConfigVersions;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** Read-only view of the daemon for the API, computed from the reconciler's last observation. */
export class DaemonStatus implements StatusView {
  private rev = 0;
  private lastObserved: unknown;
  private readonly census: CensusLedger;

  constructor(private readonly d: StatusDeps) {
    this.census = new CensusLedger(d.events);
    d.events.subscribe(() => {
      this.rev += 1;
    });
  }

  /** Changes whenever anything the status shows may have changed: any event, or a new listing. */
  revision(): number {
    const observed = this.d.reconciler.observedContainers();
    if (observed !== this.lastObserved) {
      this.lastObserved = observed;
      this.rev += 1;
    }
    return this.rev;
  }

  async status(): Promise<StatusDocument> {
    const engine = this.d.reconciler.engineStatus();
    const pre = this.d.preflight?.();
    const recovery = this.d.state.recovery();
    return {
      version: this.d.version,
      ...(this.d.build ? { build: this.d.build } : {}),
      instance: this.d.instance,
      host: await this.d.hostFacts(),
      engine,
      ...(pre ? { preflight: pre } : {}),
      definitions: this.definitionsStatus(),
      sets: this.sets(),
      retained: this.retained(),
      ...(recovery ? { stateRecovery: recovery } : {}),
    };
  }

  private definitionsStatus(): DefinitionsStatus {
    const e = this.d.definitionsError?.();
    if (!e) return { loaded: true };
    const problems = (e.details.problems as DefinitionProblem[] | undefined) ?? [];
    return {
      loaded: false,
      holding: true,
      error: { code: e.code, message: e.message, ...(problems.length > 0 ? { problems } : {}) },
    };
  }

  /** Observed containers no definition on disk names (see StatusDocument.retained). */
  retained(): ContainerStatus[] {
    const r = this.d.reconciler;
    const defined = new Set<string>();
    const walk = (s: SetSpec): void => {
      for (const c of s.containers) defined.add(c.name);
      s.sets.forEach(walk);
    };
    this.d.definitions().forEach(walk);
    const out = new Map<string, ContainerStatus>();
    for (const o of r.observedContainers()) {
      const name = o.identity.container;
      if (!defined.has(name) && !out.has(name)) out.set(name, this.containerStatus(name, o.identity.set));
    }
    return [...out.values()];
  }

  sets(): readonly SetStatus[] {
    return this.d.definitions().map((s) => this.setStatus(s));
  }

  set(path: string): SetStatus | undefined {
    const find = (list: readonly SetSpec[]): SetSpec | undefined => {
      for (const s of list) {
        if (s.path === path) return s;
        const inner = find(s.sets);
        if (inner) return inner;
      }
      return undefined;
    };
    const s = find(this.d.definitions());
    return s ? this.setStatus(s) : undefined;
  }

  private setStatus(s: SetSpec): SetStatus {
    return {
      name: s.name,
      path: s.path,
      description: s.description,
      containers: s.containers.map((c) => this.containerStatus(c.name, c.set)),
      sets: s.sets.map((x) => this.setStatus(x)),
    };
  }

  container(name: string): ContainerStatus | undefined {
    const d = this.d.reconciler.desiredContainers().find((c) => c.spec.name === name);
    return d ? this.containerStatus(name, d.spec.set) : undefined;
  }

  private containerStatus(name: string, set: string): ContainerStatus {
    const r = this.d.reconciler;
    const desired = r.desiredContainers().find((c) => c.spec.name === name);
    const p = r.primary(name);
    const f = r.factsOf(name);
    const rec = this.d.state.record(name);
    const gen = p ? this.d.state.generation(name, p.identity.generation) : undefined;
    const snap = this.d.health.snapshot(name);
    const q = r.quarantine.get(name);
    const census = this.census.view(name);
    const censusError = this.census.error(name);
    let state: ContainerState;
    if (!r.engineStatus().available) state = 'unknown';
    else if (isUpgrade(f.operation)) state = 'upgrading';
    else if (q) state = 'quarantined';
    else if (f.failed) state = 'failed';
    else if (!p) state = rec?.heldStopped ? 'stopped' : 'missing';
    else if (isRunning(p)) state = 'running';
    else if (rec?.heldStopped) state = 'stopped';
    else if (r.crashLooping(name)) state = 'crash-looping';
    else if (p.state === 'created') state = 'starting';
    else state = 'exited';
    const checks = desired?.spec.healthchecks ?? [];
    let health: HealthState = 'none';
    if (checks.some((c) => !isDependencyCheck(c))) health = snap?.status ?? 'unknown';
    const dependencies = dependencyViews(checks, snap);
    return {
      name,
      set,
      generation: p?.identity.generation ?? 0,
      image: p?.image ?? desired?.spec.image ?? '',
      imageDigest: gen?.imageDigest ?? null,
      containerId: p?.id ?? null,
      state,
      health,
      ...(dependencies.length > 0 ? { dependencies } : {}),
      dockerHealth: p?.dockerHealth ?? null,
      restartCount: f.restartCount,
      startedAt: p?.startedAt || null,
      lastError: q
        ? { code: 'RECOVERY_QUARANTINED', message: `${q.reason} (journal entry ${q.file})`, at: iso(q.at) }
        : censusError && censusError.atMs >= (f.lastError?.at ?? 0)
          ? { code: censusError.code, message: censusError.message, at: censusError.at }
          : f.lastError
            ? { code: f.lastError.code, message: f.lastError.message, at: iso(f.lastError.at) }
            : f.failed
              ? { code: 'FAILED', message: f.failed, at: iso(Date.now()) }
              : null,
      specHash: desired?.specHash ?? '',
      configHash: desired?.configHash ?? 'none',
      operation: f.operation?.id ?? null,
      ...untouchedOf(r.currentPlan(), name),
      ...(census ? { census } : {}),
    };
  }

  health(name: string): ContainerHealthView | undefined {
    const c = this.container(name);
    if (!c) return undefined;
    const snap = this.d.health.snapshot(name);
    return {
      name,
      // Only dependency checks: no health of its own, as in its ContainerStatus.
      status: c.dependencies && c.health === 'none' ? 'none' : (snap?.status ?? 'unknown'),
      dockerHealth: snap?.dockerHealth ?? this.d.reconciler.primary(name)?.dockerHealth ?? null,
      checks: (snap?.checks ?? []).map((c) => ({
        name: c.name,
        status: c.status,
        ...(c.dependency !== undefined ? { dependency: c.dependency } : {}),
        consecutiveFailures: c.consecutiveFailures,
        consecutiveSuccesses: c.consecutiveSuccesses,
        history: c.history.map((h) => ({
          at: iso(h.at),
          ok: h.ok,
          exitCode: h.exitCode,
          timedOut: h.timedOut,
          durationMs: h.durationMs,
          output: h.output,
        })),
      })),
    };
  }

  generations(name: string): readonly GenerationView[] | undefined {
    if (!this.container(name)) return undefined;
    const rec = this.d.state.record(name);
    return (rec?.generations ?? []).map(generationView).reverse();
  }

  async generationDiff(name: string, from: number, to: number): Promise<GenerationDiffView | undefined> {
    if (!this.container(name)) return undefined;
    return generationDiff(name, this.d.state.record(name), from, to, this.d.configVersions);
  }

  plan(): Promise<PlanView> {
    return this.d.plan();
  }

  subscribe(listener: Parameters<EventBus['subscribe']>[0]): () => void {
    return this.d.events.subscribe(listener);
  }

  async logs(name: string, opts: LogStreamOptions): Promise<() => void> {
    const p = this.d.reconciler.primary(name);
    if (!this.container(name) || !p)
      throw new SpcdError('NOT_FOUND', `no container named ${name}`, { container: name });
    return this.d.logs.logs(p.id, opts);
  }
}

/** Its dependency checks, each with what the health room last saw of it (unknown while not watched). */
function dependencyViews(checks: readonly CheckSpec[], snap: HealthSnapshot | undefined): DependencyView[] {
  return checks.flatMap((c) =>
    c.dependency === undefined
      ? []
      : [
          {
            check: c.name,
            dependency: c.dependency,
            status: snap?.dependencies.find((d) => d.check === c.name)?.status ?? 'unknown',
          },
        ],
  );
}

/** Why spcd leaves a container as it is (a newer spcd's labels), when it does. */
function untouchedOf(plan: Plan, name: string): { untouched?: string } {
  const reason = plan.untouched?.find((u) => u.container === name)?.reason;
  return reason === undefined ? {} : { untouched: reason };
}
