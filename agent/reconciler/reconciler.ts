import { SpcdError, toSpcdError } from '../errors.js';
import { DEFAULT_BACKOFF } from '../model/backoff.js';
import { specHash } from '../model/hash.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import { plan, pickPrimary } from '../planner/plan.js';
import type { DesiredContainer, HealRequest, Intent, Plan, RuntimeFacts } from '../planner/types.js';
import { prepareStart } from '../executor/startup.js';
import { EngineWatch, ENGINE_RETRY_MS } from './engine-watch.js';
import { ExclusiveRunner } from './exclusive.js';
import type { Released } from './adoption-release.js';
import { Heals } from './heal.js';
import { followHealth } from './health-follow.js';
import { ContainerLedger } from './ledger.js';
import { IntentBook, type IntentResult } from './intents.js';
import { Operations } from './operations.js';
import { ContainerLocks } from './locks.js';
import type { ContainerFacts, Keep, Lifecycle, ReconcilerDeps } from './types.js';
import { QuarantineBook } from './quarantine.js';
import { QuarantineRetry } from './quarantine-retry.js';
import { noteExits, type ExitDeps } from './exits.js';
import { PassLoop } from './pass-loop.js';
import { runtimeFacts, UntouchedLog, type FactSources } from './plan-input.js';
import { StepLauncher } from './tasks.js';
import { awaitShutdown, logStepsLeft, STOP_DEADLINE_MS } from './shutdown.js';

export { isUpgrade, type LockingOperation, type OperationKind } from './locks.js';

/**
 * The single owner of concurrency: observe -> plan -> execute -> repeat. Triggers (engine events, timers,
 * API requests) ask for a pass; passes never overlap. A check that crosses its failure threshold has its
 * heal planned and launched at once (healNow), without waiting for the pass. Each step runs as a task
 * with its container locked, so a long upgrade does not delay another container's restart. Events are hints:
 * a lost stream triggers a re-list, never an action. Its parts, each the only writer of what it keeps,
 * are in docs/architecture.md.
 */
export class Reconciler {
  private lifecycle: Lifecycle = 'new';
  private desired: DesiredContainer[] = [];
  private refresh: (() => Promise<DesiredContainer[]>) | undefined; // start()'s
  private observed: ObservedContainer[] = [];
  private unsubscribeHealth: (() => void) | undefined;
  private stopping: Promise<void> | undefined;
  private lastPlan: Plan = { steps: [], waiting: [] };
  /** When set, nothing new is created (a blocking preflight failure); running containers are still kept. */
  private createBlock: string | null = null;
  private keep: Keep | null = null;
  private readonly watch: EngineWatch;
  private readonly locks: ContainerLocks;
  /** Every task that locks a container; the one way to run code under a container's lock. */
  private readonly exclusive: ExclusiveRunner;
  private readonly ledger: ContainerLedger;
  private readonly heals: Heals;
  private readonly loop: PassLoop;
  private readonly exitDeps: ExitDeps;
  private readonly untouched: UntouchedLog;
  /** The operator's one-shot intents, until a pass carries them out. */
  private readonly intents = new IntentBook();
  private readonly launcher: StepLauncher;
  /** Containers whose journal entry is unresolved: left alone until an operator clears them. */
  readonly quarantine: QuarantineBook;
  /** Every operation's id and outcome, and the one way to wait for it (`done`). */
  readonly operations: Operations;
  private readonly retries: QuarantineRetry;
  private readonly factSources: FactSources;

  constructor(private readonly deps: ReconcilerDeps) {
    this.ledger = new ContainerLedger(deps.backoff ?? DEFAULT_BACKOFF);
    this.operations = deps.operations ?? new Operations(deps);
    this.quarantine = new QuarantineBook(deps);
    this.untouched = new UntouchedLog(deps.log);
    this.retries = new QuarantineRetry({
      ...deps,
      book: this.quarantine,
      locked: (name) => this.locks.lockedBy(name) !== null,
      trigger: () => this.trigger(),
      cleared: async () => {
        if (this.refresh) this.desired = await this.refresh();
      },
    });
    this.watch = new EngineWatch({
      ...deps,
      onChange: () => this.trigger(),
      desired: () => this.desired,
      running: () => this.lifecycle === 'running',
      stopping: () => this.lifecycle === 'stopping' || this.lifecycle === 'stopped',
    });
    this.locks = new ContainerLocks(() => this.watch.listing());
    this.exclusive = new ExclusiveRunner({
      locks: this.locks,
      quarantine: this.quarantine,
      journal: deps.exec.journal,
      assertFree: (name) => this.assertFree(name),
      released: () => this.trigger(),
    });
    this.loop = new PassLoop({
      clock: deps.clock,
      body: () => this.pass(),
      idleMs: deps.relistMs,
      active: () => this.lifecycle === 'running',
      // A pass that threw is logged; the loop schedules the next one as after any pass.
      onError: (err) => {
        const e = toSpcdError(err);
        if (this.lifecycle === 'running') deps.log.error({ err: e.message, code: e.code }, 'pass failed');
      },
    });
    this.launcher = new StepLauncher({
      exec: deps.exec,
      log: deps.log,
      clock: deps.clock,
      ledger: this.ledger,
      locks: this.locks,
      intents: this.intents,
      operations: this.operations,
      busyTasks: () => this.exclusive.count(),
      requeue: () => this.loop.requeue(),
      runExclusive: (name, op, fn) => this.exclusive.run(name, op, fn),
      forgetHealth: (name) => this.deps.health.forget(name),
      pinned: (spec) => this.pinned(spec),
      retries: this.retries,
    });
    this.exitDeps = {
      state: deps.exec.state,
      ledger: this.ledger,
      events: deps.events,
      log: deps.log,
      primary: (name) => this.primary(name),
      lockedDuringListing: (name) => this.locks.lockedDuringListing(name),
    };
    const ready = (name: string): boolean => deps.health.ready(name);
    this.factSources = { ledger: this.ledger, locks: this.locks, state: deps.exec.state, ready };
    this.heals = new Heals({
      ...deps,
      ledger: this.ledger,
      primary: (name) => this.primary(name),
      locked: (name) => this.locks.lockedBy(name) !== null || this.intents.of(name) !== undefined,
      lockedDuringListing: (name) => this.locks.lockedDuringListing(name),
      quarantined: (name) => this.quarantine.get(name) !== undefined,
    });
  }

  get state(): Lifecycle {
    return this.lifecycle;
  }

  /**
   * Recovers interrupted upgrades, adopts what runs, and converges once. `refresh` gives the desired
   * containers again (pins applied) after a recovery that committed a change: its pin moved.
   */
  async start(desired: DesiredContainer[], refresh?: () => Promise<DesiredContainer[]>): Promise<void> {
    if (this.lifecycle !== 'new')
      throw new SpcdError('INTERNAL', `reconciler cannot start from ${this.lifecycle}`);
    this.lifecycle = 'starting';
    this.desired = desired;
    this.unsubscribeHealth = followHealth(this.deps.health, {
      heals: this.heals,
      current: (a) => this.lifecycle === 'running' && this.primary(a.name)?.id === a.containerId,
      healNow: (name) => this.healNow(name),
      desired: () => this.desired,
      trigger: () => this.trigger(),
    });
    await this.watch.waitAvailable();
    await prepareStart(this.deps.exec, desired);
    this.refresh = refresh;
    if ((await this.retries.recoverAtStart()) > 0 && refresh) this.desired = await refresh();
    if (this.lifecycle !== 'starting') throw new SpcdError('SHUTTING_DOWN', 'stopped while starting');
    this.watch.subscribe();
    this.lifecycle = 'running';
    await this.loop.run();
  }

  /**
   * No new pass or operation; the pass in flight begins no step, the steps
   * running finish. Resolves then, or at STOP_DEADLINE_MS (shutdown.ts). Idempotent.
   */
  stop(): Promise<void> {
    if (this.lifecycle === 'stopped') return Promise.resolve();
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    this.lifecycle = 'stopping';
    this.loop.close();
    this.watch.close();
    this.unsubscribeHealth?.();
    this.intents.failAll(new SpcdError('SHUTTING_DOWN', 'spcd is shutting down'));
    this.retries.dropAll();
    await awaitShutdown({
      clock: this.deps.clock,
      log: this.deps.log,
      deadlineMs: this.deps.stopDeadlineMs ?? STOP_DEADLINE_MS,
      passEnded: () => this.loop.idle(),
      stepsSettled: () => this.exclusive.settled(),
      inFlight: () => ({ pass: this.loop.busy(), containers: this.locks.names() }),
    });
    this.lifecycle = 'stopped';
  }

  /** Whether a pass runs now (after stop() only when its deadline passed with the pass still in flight). */
  passInFlight(): boolean {
    return this.loop.busy();
  }

  blockCreates(reason: string | null): void {
    this.createBlock = reason;
    this.trigger();
  }

  /** Definitions read cleanly: they replace whatever was desired, and end the keep. */
  setDesired(desired: DesiredContainer[]): void {
    this.ledger.definitionsReplaced(this.desired, desired);
    this.desired = desired;
    this.keep = null;
    this.trigger();
  }

  /** Keeps what runs until setDesired() (see Keep). */
  keepRunning(keep: Keep): void {
    this.keep = keep;
    this.desired = keep.derive(this.observed);
    this.trigger();
  }

  /** Why what runs is kept (the definitions could not be read), or null when they are in force. */
  keptBecause(): string | null {
    return this.keep?.reason ?? null;
  }

  desiredContainers(): readonly DesiredContainer[] {
    return this.desired;
  }

  /** Asks for a pass as soon as possible; coalesces. */
  trigger(): void {
    this.loop.trigger();
  }

  engineStatus(): { available: boolean; reason?: string } {
    return this.watch.status();
  }

  observedContainers(): readonly ObservedContainer[] {
    return this.observed;
  }

  primary(name: string): ObservedContainer | undefined {
    return pickPrimary(
      name,
      this.observed.filter((o) => o.identity.container === name),
    );
  }

  /** The container's ledger entry and what has it locked, or the intent it waits to carry out (a snapshot). */
  factsOf(name: string): ContainerFacts {
    const operation = this.locks.lockedBy(name) ?? this.intents.of(name)?.operation ?? null;
    return { ...this.ledger.of(name), operation };
  }

  /**
   * The operator's verb: keeps its intent and asks for a pass, which plans
   * and runs its step under the intent's operation. Resolves with what the
   * step returns. CONFLICT at once when the container is locked or has one.
   */
  request(name: string, intent: Intent): Promise<IntentResult> {
    this.assertFree(name);
    const done = this.intents.put(name, intent);
    this.trigger();
    return done;
  }

  crashLooping(name: string): boolean {
    return this.ledger.crashLooping(name);
  }

  currentPlan(): Plan {
    return this.lastPlan;
  }

  /** What a pass would do now, without doing it. */
  preview(desired: readonly DesiredContainer[] = this.desired, unlabeled = this.watch.unlabeled()): Plan {
    return plan({
      desired,
      observed: this.observed,
      facts: this.runtimeFacts(),
      now: this.deps.clock.now(),
      journal: this.quarantine.quarantined(),
      unlabeled,
    });
  }

  /** Throws CONFLICT (or SHUTTING_DOWN) when an operation on this container could not start now. */
  assertFree(name: string): void {
    this.locks.assertFree(name);
    this.intents.assertNone(name);
    if (this.lifecycle === 'stopping' || this.lifecycle === 'stopped') {
      throw new SpcdError('SHUTTING_DOWN', 'spcd is shutting down');
    }
  }

  /**
   * The operator's release: forgets the container's adoption with the container locked by operation `id` (an
   * `adopt`); the container runs on untouched. NOT_FOUND when not adopted; CONFLICT when locked.
   */
  releaseAdoption(name: string, id: string): Promise<Released> {
    return this.launcher.release(name, id);
  }

  /** Tries every quarantined container again (spcctl reload / SIGHUP), each a `recover` step; resolves with those still quarantined and the steps' operations. */
  retryQuarantined(): ReturnType<QuarantineRetry['all']> {
    if (this.lifecycle !== 'running') return Promise.resolve(this.retries.none());
    return this.retries.all();
  }

  private runtimeFacts(heals?: ReadonlyMap<string, HealRequest>): Map<string, RuntimeFacts> {
    const requests = heals && { heals, intents: (name: string) => this.intents.of(name) };
    return runtimeFacts(this.desired, this.observed, this.factSources, requests);
  }

  /** One pass: the five steps of docs/architecture.md. Resolves with the delay before the next. */
  private async pass(): Promise<number> {
    // 1. List the engine's containers. Engine away: take no action until it answers again.
    const observed = await this.watch.list();
    if (!observed) {
      this.deps.onHeartbeat?.();
      return ENGINE_RETRY_MS;
    }
    this.observed = observed;
    if (this.keep) this.desired = this.keep.derive(this.observed);
    const now = this.deps.clock.now();
    // 2. Count each exit once toward its backoff; watch the health of what runs.
    await noteExits(this.exitDeps, this.desired, now);
    // stop() came while this pass listed or counted exits: it begins no step.
    if (this.lifecycle !== 'running') {
      logStepsLeft(this.deps.log, this.preview().steps.length);
      return this.deps.relistMs;
    }
    this.deps.health.sync(
      this.desired.map((d) => ({
        spec: d.spec,
        primary: this.primary(d.spec.name),
        locked: this.locks.lockedDuringListing(d.spec.name),
      })),
    );
    // 3. Plan: the desired containers against what runs, with the operator's intents and the heals.
    const p = this.planPass(now);
    // 4. Each step a task that locks its container.
    this.launcher.launch(p.steps);
    this.intents.dropUndesired(new Set(this.desired.map((d) => d.spec.name)));
    // 5. Wake for what waits on time; engine events and API calls only trigger().
    // A quarantine that a full state disk caused is tried again by itself, with backoff.
    const retryAt = this.retries.tick(now);
    let next = this.deps.relistMs;
    for (const at of [p.wakeAt, retryAt]) if (at !== undefined) next = Math.min(next, Math.max(0, at - now));
    this.deps.onHeartbeat?.();
    return next;
  }

  /** The planner's steps for everything desired, with the preflight block and the reason what runs is kept. */
  private planPass(now: number): Plan {
    const p = plan({
      desired: this.desired,
      observed: this.observed,
      facts: this.runtimeFacts(this.heals.requests(this.desired)),
      now,
      journal: this.quarantine.quarantined(),
      recover: this.retries.requested(),
      createBlock: this.createBlock,
      keptBecause: this.keep?.reason ?? null,
      unlabeled: this.watch.unlabeled(),
    });
    this.lastPlan = p;
    this.untouched.note(p);
    return p;
  }

  /** A check asked for a heal of what runs: plan that container now and run its heal. */
  private healNow(name: string): void {
    const d = this.desired.find((x) => x.spec.name === name);
    if (!d) return;
    const p = plan({
      desired: [d],
      observed: this.observed.filter((o) => o.identity.container === name),
      facts: this.runtimeFacts(this.heals.requests([d])),
      now: this.deps.clock.now(),
      journal: this.quarantine.quarantined(),
    });
    this.launcher.launch(p.steps.filter((s) => s.origin.by === 'heal'));
  }

  /** The operator's change succeeded (and is pinned): it is the desired spec from now on. */
  private pinned(spec: ContainerSpec): void {
    this.desired = this.desired.map((c) =>
      c.spec.name === spec.name ? { ...c, spec, specHash: specHash(spec) } : c,
    );
  }
}
