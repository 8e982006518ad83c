import { randomUUID } from 'node:crypto';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { DEFAULT_BACKOFF, type BackoffPolicy } from '../model/backoff.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerEngine, EventEngine } from '../engine/types.js';
import { plan, pickPrimary } from '../planner/plan.js';
import type { DesiredContainer, Plan, RuntimeFacts, Step } from '../planner/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { recoverJournal, retryQuarantined } from '../executor/recover.js';
import { prepareStart } from '../executor/startup.js';
import { EngineWatch, ENGINE_RETRY_MS } from './engine-watch.js';
import { Heals } from './heal.js';
import type { HealthSync } from './health-sync.js';
import { ContainerLedger, type LedgerEntry } from './ledger.js';
import { ContainerLocks, type HeldOperation } from './locks.js';
import { QuarantineBook } from './quarantine.js';
import { noteExits, type ExitDeps } from './exits.js';
import { PassLoop } from './pass-loop.js';
import { restrict, runtimeFacts, UntouchedLog } from './plan-input.js';
import { giveUpReason, runStep, stepContainer } from './steps.js';

export type { HealthPort } from './health-sync.js';
export { isUpgrade, type HeldOperation, type OperationKind } from './locks.js';

export type Lifecycle = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** One container's facts as the status view reads them: its ledger entry and what holds it. */
export interface ContainerFacts extends LedgerEntry {
  readonly operation: HeldOperation | null;
}

export interface ReconcilerDeps {
  readonly engine: ContainerEngine & EventEngine;
  readonly exec: ExecutorDeps;
  /** The only owner of health watches; the executor's health gate is the same object. */
  readonly health: HealthSync;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly instance: string;
  readonly relistMs: number;
  readonly backoff?: BackoffPolicy;
  /**
   * The watchdog's proof of life: called after every pass that ran to its
   * end, including one that found the engine away (the loop is alive, waiting
   * for it). A loop that stops passing stops calling it.
   */
  readonly onHeartbeat?: () => void;
}

/**
 * The definitions could not be read: keep what runs and restart what exits,
 * nothing else (no create, no replace, no remove). `derive` gives the
 * containers to keep from what the engine shows.
 */
export interface Hold {
  readonly reason: string;
  readonly derive: (observed: readonly ObservedContainer[]) => DesiredContainer[];
}

const MAX_PARALLEL_TASKS = 4;

/**
 * The single owner of concurrency: observe -> plan -> execute -> repeat.
 * Triggers (engine events, timers, API requests) only ask for a pass; passes
 * never overlap. Each step runs as a task holding its container, so a long
 * upgrade does not delay another container's restart. Events are hints: a
 * lost stream triggers a re-list, never an action.
 *
 * Its parts, each the only writer of what it keeps: the engine watch
 * (availability, events, listings), the locks (who holds a container), the
 * ledger (exits, restarts, backoff, failure), health sync (the watches), the
 * heals, and the quarantine book.
 */
export class Reconciler {
  private lifecycle: Lifecycle = 'new';
  private desired: DesiredContainer[] = [];
  private observed: ObservedContainer[] = [];
  private readonly tasks = new Set<Promise<void>>();
  private unsubscribeHealth: (() => void) | undefined;
  private lastPlan: Plan = { steps: [], waiting: [] };
  /** When set, nothing new is created (a blocking preflight failure); running containers are still kept. */
  private createBlock: string | null = null;
  private hold: Hold | null = null;
  private readonly watch: EngineWatch;
  private readonly locks: ContainerLocks;
  private readonly ledger: ContainerLedger;
  private readonly heals: Heals;
  private readonly loop: PassLoop;
  private readonly exitDeps: ExitDeps;
  private readonly untouched: UntouchedLog;
  /** Containers whose journal entry is unresolved: left alone until an operator clears them. */
  readonly quarantine: QuarantineBook;

  constructor(private readonly deps: ReconcilerDeps) {
    this.ledger = new ContainerLedger(deps.backoff ?? DEFAULT_BACKOFF);
    this.quarantine = new QuarantineBook(deps);
    this.untouched = new UntouchedLog(deps.log);
    this.watch = new EngineWatch({
      ...deps,
      onChange: () => this.trigger(),
      running: () => this.lifecycle === 'running',
      stopping: () => this.lifecycle === 'stopping' || this.lifecycle === 'stopped',
    });
    this.locks = new ContainerLocks(() => this.watch.listing());
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
    this.exitDeps = {
      state: deps.exec.state,
      ledger: this.ledger,
      events: deps.events,
      log: deps.log,
      primary: (name) => this.primary(name),
      heldDuringListing: (name) => this.locks.heldDuringListing(name),
    };
    this.heals = new Heals({
      engine: deps.exec.engine,
      ledger: this.ledger,
      healthSync: deps.health,
      events: deps.events,
      log: deps.log,
      clock: deps.clock,
      primary: (name) => this.primary(name),
      held: (name) => this.locks.holder(name) !== null,
      heldDuringListing: (name) => this.locks.heldDuringListing(name),
      quarantined: (name) => this.quarantine.get(name) !== undefined,
      runExclusive: (name, op, fn) => this.runExclusive(name, op, fn),
    });
  }

  get state(): Lifecycle {
    return this.lifecycle;
  }

  /** Recovers interrupted upgrades, adopts what runs, and converges once. */
  async start(desired: DesiredContainer[]): Promise<void> {
    if (this.lifecycle !== 'new')
      throw new SpcdError('INTERNAL', `reconciler cannot start from ${this.lifecycle}`);
    this.lifecycle = 'starting';
    this.desired = desired;
    this.unsubscribeHealth = this.deps.health.onAction((a) => {
      if (!this.heals.noteAction(a)) return;
      // Act at once when the last observation shows this very instance running: a pass may be
      // slow to come (its inspect of another container waits while the engine starts that one).
      const d = this.desired.find((x) => x.spec.name === a.name);
      if (this.lifecycle === 'running' && d && this.primary(a.name)?.id === a.containerId)
        this.heals.launch(d, this.deps.clock.now());
      this.trigger();
    });
    await this.watch.waitAvailable();
    await prepareStart(this.deps.exec, desired);
    // Entry by entry: one that cannot be finished or undone is quarantined, the others go on.
    const rec = await recoverJournal(this.deps.exec);
    for (const q of rec.quarantined) this.quarantine.add(q);
    if (rec.undone.length || rec.finished.length || rec.quarantined.length)
      this.deps.log.warn(
        { undone: rec.undone, finished: rec.finished, quarantined: rec.quarantined.map((q) => q.container) },
        'journal recovery done',
      );
    if (this.lifecycle !== 'starting') throw new SpcdError('SHUTTING_DOWN', 'stopped while starting');
    this.watch.subscribe();
    this.lifecycle = 'running';
    await this.loop.run();
  }

  async stop(): Promise<void> {
    if (this.lifecycle === 'stopped') return;
    this.lifecycle = 'stopping';
    this.loop.close();
    this.watch.close();
    this.unsubscribeHealth?.();
    // In-flight operations finish (an upgrade is not abandoned half way); containers keep running.
    await Promise.allSettled([...this.tasks]);
    this.lifecycle = 'stopped';
  }

  blockCreates(reason: string | null): void {
    this.createBlock = reason;
    this.trigger();
  }

  /** Definitions read cleanly: they replace whatever was desired, and end a hold. */
  setDesired(desired: DesiredContainer[]): void {
    this.desired = desired;
    this.hold = null;
    this.trigger();
  }

  /** Holds what runs until setDesired() (see Hold). */
  holdRunning(hold: Hold): void {
    this.hold = hold;
    this.desired = hold.derive(this.observed);
    this.trigger();
  }

  holding(): string | null {
    return this.hold?.reason ?? null;
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

  /** The container's ledger entry and what holds it (a snapshot: the parts own the facts). */
  factsOf(name: string): ContainerFacts {
    return { ...this.ledger.of(name), operation: this.locks.holder(name) };
  }

  crashLooping(name: string): boolean {
    return this.ledger.crashLooping(name);
  }

  /** The operator started it: spcd tries it again and forgets a pending heal. */
  clearFailure(name: string): void {
    this.ledger.operatorStarted(name);
  }

  currentPlan(): Plan {
    return this.lastPlan;
  }

  /** What a pass would do now, without doing it. */
  preview(desired: readonly DesiredContainer[] = this.desired): Plan {
    return plan({
      desired,
      observed: this.observed,
      facts: this.runtimeFacts(),
      now: this.deps.clock.now(),
      journal: this.quarantine.holds(),
    });
  }

  /** Throws CONFLICT (or SHUTTING_DOWN) when an operation on this container could not start now. */
  assertFree(name: string): void {
    this.locks.assertFree(name);
    if (this.lifecycle === 'stopping' || this.lifecycle === 'stopped') {
      throw new SpcdError('SHUTTING_DOWN', 'spcd is shutting down');
    }
  }

  /**
   * Runs fn holding the container: no pass and no other operation touches it
   * meanwhile. Rejects CONFLICT at once when it is held.
   */
  runExclusive<T>(name: string, op: HeldOperation, fn: () => Promise<T>): Promise<T> {
    try {
      this.assertFree(name);
    } catch (err) {
      return Promise.reject(err);
    }
    this.locks.acquire(name, op);
    const run = (async () => {
      try {
        return await fn();
      } catch (err) {
        const e = toSpcdError(err);
        this.ledger.errored(name, e, this.deps.clock.now());
        await this.quarantine.afterFailure(name, e, this.deps.exec.journal);
        throw err;
      } finally {
        this.locks.release(name);
        this.trigger();
      }
    })();
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.tasks.add(settled);
    void settled.then(() => this.tasks.delete(settled));
    return run;
  }

  /**
   * Tries every quarantined container again (spcctl reload / SIGHUP): one
   * whose journal file the operator removed, or whose entry now finishes or
   * undoes, leaves quarantine. Returns the containers still quarantined.
   */
  async retryQuarantined(): Promise<string[]> {
    for (const name of this.quarantine.names()) {
      if (this.locks.holder(name)) continue;
      const op: HeldOperation = { id: `reconcile-recover-${randomUUID().slice(0, 8)}`, kind: 'recover' };
      const r = await this.runExclusive(name, op, () => retryQuarantined(this.deps.exec, name)).catch(
        (err: unknown) => toSpcdError(err),
      );
      if (r === 'cleared') {
        this.ledger.errorCleared(name);
        this.quarantine.clear(name, 'journal entry resolved or removed; supervised again');
      } else if (!(r instanceof SpcdError)) this.quarantine.add(r);
    }
    this.trigger();
    return this.quarantine.names();
  }

  private runtimeFacts(): Map<string, RuntimeFacts> {
    return runtimeFacts(this.desired, this.observed, this.ledger, this.locks, this.deps.exec.state);
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
    if (this.hold) this.desired = this.hold.derive(this.observed);
    const now = this.deps.clock.now();
    // 2. Count each exit once toward its backoff; watch the health of what runs.
    await noteExits(this.exitDeps, this.desired, now);
    this.deps.health.sync(
      this.desired.map((d) => ({
        spec: d.spec,
        primary: this.primary(d.spec.name),
        held: this.locks.heldDuringListing(d.spec.name),
      })),
    );
    // 3. Plan: the desired containers against what runs.
    const p = this.planPass(now);
    // 4. Each step (and each heal) a task holding its container.
    this.launch(p.steps);
    const healAt = this.heals.launchAll(this.desired, now);
    // 5. Wake for what waits on time; engine events and API calls only trigger().
    let next = this.deps.relistMs;
    if (p.wakeAt !== undefined) next = Math.min(next, Math.max(0, p.wakeAt - now));
    if (healAt !== undefined) next = Math.min(next, Math.max(0, healAt - now));
    this.deps.onHeartbeat?.();
    return next;
  }

  /** The planner's steps, less what the preflight block and a definitions hold keep waiting. */
  private planPass(now: number): Plan {
    let p = plan({
      desired: this.desired,
      observed: this.observed,
      facts: this.runtimeFacts(),
      now,
      journal: this.quarantine.holds(),
    });
    const block = this.createBlock;
    if (block) p = restrict(p, (s) => s.kind !== 'create', `preflight blocks: ${block}`);
    const hold = this.hold;
    if (hold) p = restrict(p, (s) => s.kind === 'start', `definitions not loaded: ${hold.reason}`);
    this.lastPlan = p;
    this.untouched.note(p);
    return p;
  }

  private launch(steps: readonly Step[]): void {
    for (const s of steps) {
      if (this.tasks.size >= MAX_PARALLEL_TASKS) {
        this.loop.requeue();
        return;
      }
      const name = stepContainer(s);
      const op: HeldOperation = { id: `reconcile-${randomUUID().slice(0, 8)}`, kind: 'reconcile' };
      this.runExclusive(name, op, () => runStep(this.deps.exec, this.ledger, s, op.id)).catch(
        (err: unknown) => {
          const e = toSpcdError(err);
          if (e.code === 'CONFLICT') return;
          this.ledger.stepFailed(name, e, this.deps.clock.now(), giveUpReason(s, e));
          this.deps.log.warn({ container: name, step: s.kind, code: e.code, err: e.message }, 'step failed');
        },
      );
    }
  }
}
