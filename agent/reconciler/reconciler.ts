import { randomUUID } from 'node:crypto';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import {
  DEFAULT_BACKOFF,
  FRESH_BACKOFF,
  isCrashLooping,
  recordFailure,
  recordStart,
  type BackoffPolicy,
  type BackoffState,
} from '../model/backoff.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { ContainerEngine, EventEngine, EngineEvent, EventSubscription } from '../engine/types.js';
import { plan, pickPrimary } from '../planner/plan.js';
import type { DesiredContainer, Plan, RuntimeFacts, Step } from '../planner/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { recoverJournal, retryQuarantined } from '../executor/recover.js';
import { prepareStart } from '../executor/startup.js';
import { createContainer, removeContainer, startContainer } from '../executor/simple.js';
import { upgradeContainer } from '../executor/upgrade.js';
import type { HealthAction, WatchTarget } from '../health/types.js';
import { QuarantineBook } from './quarantine.js';

export type Lifecycle = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** What the reconciler needs of the health room. */
export interface HealthPort {
  watch(target: WatchTarget): void;
  unwatch(name: string): void;
  update(
    name: string,
    patch: { containerId?: string; dockerHealth?: ObservedContainer['dockerHealth'] },
  ): void;
  onAction(listener: (a: HealthAction) => void): () => void;
}

export interface ContainerFacts {
  backoff: BackoffState;
  /** The operation holding the container, if any. */
  operation: string | null;
  failed: string | null;
  lastError: { code: string; message: string; at: number } | null;
  restartCount: number;
  /** finishedAt of the last exit already counted. */
  lastExitSeen: string;
  pendingHeal: { reason: string } | null;
  /**
   * The listing number current when the last operation on it ended. A pass
   * whose listing began at or before that number saw the container while it
   * was held, so it neither counts an exit from it nor acts on it.
   */
  releasedAtListing: number;
}

export interface ReconcilerDeps {
  readonly engine: ContainerEngine & EventEngine;
  readonly exec: ExecutorDeps;
  readonly health: HealthPort;
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

const ENGINE_RETRY_MS = 1_000;
const MAX_PARALLEL_TASKS = 4;

/**
 * The single owner of concurrency: observe -> plan -> execute -> repeat.
 * Triggers (engine events, timers, API requests) only ask for a pass; passes
 * never overlap. Each step runs as a task holding its container, so a long
 * upgrade does not delay another container's restart. Events are hints: a
 * lost stream triggers a re-list, never an action.
 */
export class Reconciler {
  private lifecycle: Lifecycle = 'new';
  private desired: DesiredContainer[] = [];
  private observed: ObservedContainer[] = [];
  private readonly facts = new Map<string, ContainerFacts>();
  private readonly tasks = new Set<Promise<void>>();
  private readonly watched = new Map<string, string>();
  private engineAvailable = false;
  private engineReason = 'not yet contacted';
  private passRunning = false;
  private passQueued = false;
  private cancelTimer: (() => void) | undefined;
  private subscription: EventSubscription | undefined;
  private unsubscribeHealth: (() => void) | undefined;
  private lastPlan: Plan = { steps: [], waiting: [] };
  /** Containers left as they are (a newer spcd's labels) already logged, with the reason logged. */
  private untouchedLogged = new Map<string, string>();
  /** Bumped just before each listing of the engine's containers. */
  private listing = 0;
  private readonly backoff: BackoffPolicy;
  /** When set, nothing new is created (a blocking preflight failure); running containers are still kept. */
  private createBlock: string | null = null;
  private hold: Hold | null = null;
  /** Containers whose journal entry is unresolved: left alone until an operator clears them. */
  readonly quarantine: QuarantineBook;

  constructor(private readonly deps: ReconcilerDeps) {
    this.backoff = deps.backoff ?? DEFAULT_BACKOFF;
    this.quarantine = new QuarantineBook(deps);
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
    this.unsubscribeHealth = this.deps.health.onAction((a) => this.onHealthAction(a));
    await this.waitForEngine();
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
    this.subscribe();
    this.lifecycle = 'running';
    await this.pass();
  }

  async stop(): Promise<void> {
    if (this.lifecycle === 'stopped') return;
    this.lifecycle = 'stopping';
    this.cancelTimer?.();
    this.subscription?.close();
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
    if (this.lifecycle !== 'running') return;
    if (this.passRunning) {
      this.passQueued = true;
      return;
    }
    this.schedule(0);
  }

  engineStatus(): { available: boolean; reason?: string } {
    return this.engineAvailable ? { available: true } : { available: false, reason: this.engineReason };
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

  factsOf(name: string): ContainerFacts {
    let f = this.facts.get(name);
    if (!f) {
      f = {
        backoff: FRESH_BACKOFF,
        operation: null,
        failed: null,
        lastError: null,
        restartCount: 0,
        lastExitSeen: '',
        pendingHeal: null,
        releasedAtListing: -1,
      };
      this.facts.set(name, f);
    }
    return f;
  }

  /** Held now, or released after this pass's listing began (so the listing may predate its end). */
  private heldDuringListing(f: ContainerFacts): boolean {
    return f.operation !== null || f.releasedAtListing >= this.listing;
  }

  crashLooping(name: string): boolean {
    return isCrashLooping(this.factsOf(name).backoff, this.backoff);
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
    const f = this.factsOf(name);
    if (f.operation) {
      throw new SpcdError('CONFLICT', `${name} is busy with operation ${f.operation}`, {
        container: name,
        operation: f.operation,
      });
    }
    if (this.lifecycle === 'stopping' || this.lifecycle === 'stopped') {
      throw new SpcdError('SHUTTING_DOWN', 'spcd is shutting down');
    }
  }

  /**
   * Runs fn holding the container: no pass and no other operation touches it
   * meanwhile. Rejects CONFLICT at once when it is held.
   */
  runExclusive<T>(name: string, operationId: string, fn: () => Promise<T>): Promise<T> {
    const f = this.factsOf(name);
    if (f.operation) {
      return Promise.reject(
        new SpcdError('CONFLICT', `${name} is busy with operation ${f.operation}`, {
          container: name,
          operation: f.operation,
        }),
      );
    }
    if (this.lifecycle === 'stopping' || this.lifecycle === 'stopped') {
      return Promise.reject(new SpcdError('SHUTTING_DOWN', 'spcd is shutting down'));
    }
    f.operation = operationId;
    const run = (async () => {
      try {
        return await fn();
      } catch (err) {
        const e = toSpcdError(err);
        f.lastError = { code: e.code, message: e.message, at: this.deps.clock.now() };
        await this.quarantineIfJournaled(name, e);
        throw err;
      } finally {
        f.operation = null;
        f.releasedAtListing = this.listing;
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

  /** An operation that failed and left its journal entry (a rollback that could not finish) quarantines its container. */
  private async quarantineIfJournaled(name: string, e: SpcdError): Promise<void> {
    if (this.quarantine.get(name)) return;
    const file = this.deps.exec.journal.fileOf(name);
    try {
      const entry = await this.deps.exec.journal.read(name);
      if (entry) this.quarantine.add({ container: name, file, reason: `${e.code}: ${e.message}`, entry });
    } catch (err) {
      const bad = toSpcdError(err);
      this.quarantine.add({
        container: name,
        file,
        reason: `malformed journal entry: ${bad.message}`,
        entry: undefined,
      });
    }
  }

  /**
   * Tries every quarantined container again (spcctl reload / SIGHUP): one
   * whose journal file the operator removed, or whose entry now finishes or
   * undoes, leaves quarantine. Returns the containers still quarantined.
   */
  async retryQuarantined(): Promise<string[]> {
    for (const name of this.quarantine.names()) {
      if (this.factsOf(name).operation) continue;
      const r = await this.runExclusive(name, `reconcile-recover-${randomUUID().slice(0, 8)}`, () =>
        retryQuarantined(this.deps.exec, name),
      ).catch((err: unknown) => toSpcdError(err));
      if (r === 'cleared') {
        this.factsOf(name).lastError = null;
        this.quarantine.clear(name, 'journal entry resolved or removed; supervised again');
      } else if (!(r instanceof SpcdError)) this.quarantine.add(r);
    }
    this.trigger();
    return this.quarantine.names();
  }

  private schedule(ms: number): void {
    this.cancelTimer?.();
    this.cancelTimer = this.deps.clock.setTimer(ms, () => {
      this.cancelTimer = undefined;
      void this.pass();
    });
  }

  private async waitForEngine(): Promise<void> {
    for (;;) {
      try {
        await this.deps.engine.ping();
        this.setEngine(true);
        return;
      } catch (err) {
        this.setEngine(false, toSpcdError(err).message);
        if (this.lifecycle === 'stopping' || this.lifecycle === 'stopped')
          throw new SpcdError('SHUTTING_DOWN', 'stopped while waiting for the engine');
        await new Promise<void>((r) => this.deps.clock.setTimer(ENGINE_RETRY_MS, r));
      }
    }
  }

  private setEngine(available: boolean, reason = ''): void {
    if (available === this.engineAvailable && (available || reason === this.engineReason)) return;
    const changed = available !== this.engineAvailable;
    this.engineAvailable = available;
    this.engineReason = reason;
    if (changed) {
      this.deps.log[available ? 'info' : 'warn'](
        { reason },
        available ? 'engine available' : 'engine unavailable',
      );
      this.deps.events.publish({
        type: 'engine',
        at: this.deps.clock.now(),
        available,
        ...(reason ? { reason } : {}),
      });
    }
  }

  private subscribe(): void {
    this.subscription?.close();
    this.subscription = this.deps.engine.subscribe(this.deps.instance, (e) => this.onEngineEvent(e));
  }

  private onEngineEvent(e: EngineEvent): void {
    if (this.lifecycle !== 'running') return;
    if (e.kind === 'stream-lost') {
      // Never read as "exited": re-subscribe, and re-list to learn what really happened.
      this.deps.log.info({ err: e.error?.message }, 'engine event stream lost; re-listing');
      this.subscription = undefined;
      this.deps.clock.setTimer(ENGINE_RETRY_MS, () => {
        if (this.lifecycle === 'running' && !this.subscription) this.subscribe();
      });
      this.trigger();
      return;
    }
    if (e.action === 'health_status') return;
    this.trigger();
  }

  private onHealthAction(a: HealthAction): void {
    const f = this.factsOf(a.name);
    if (f.pendingHeal || f.operation || this.quarantine.get(a.name)) return;
    if (a.action === 'stop') f.failed = `check ${a.check} failed: ${a.reason}`;
    else f.backoff = recordFailure(f.backoff, this.deps.clock.now(), this.backoff);
    f.pendingHeal = { reason: `check ${a.check} failed ${a.consecutiveFailures} times: ${a.reason}` };
    this.deps.events.publish({
      type: 'health',
      at: this.deps.clock.now(),
      container: a.name,
      check: a.check,
      status: 'unhealthy',
      output: a.lastOutputs[a.lastOutputs.length - 1] ?? '',
    });
    // Act at once when the last observation shows this very instance running: a pass may be
    // slow to come (its inspect of another container waits while the engine starts that one).
    const d = this.desired.find((x) => x.spec.name === a.name);
    if (this.lifecycle === 'running' && d && this.primary(a.name)?.id === a.containerId)
      this.launchHeal(d, this.deps.clock.now());
    this.trigger();
  }

  private runtimeFacts(): Map<string, RuntimeFacts> {
    const m = new Map<string, RuntimeFacts>();
    for (const d of this.desired) {
      const name = d.spec.name;
      const f = this.factsOf(name);
      const rec = this.deps.exec.state.record(name);
      m.set(name, {
        busy: this.heldDuringListing(f),
        heldStopped: rec?.heldStopped ?? false,
        failed: f.failed !== null,
        nextAttemptAt: f.backoff.nextAttemptAt,
        ...(rec?.failedTarget ? { failedTarget: rec.failedTarget } : {}),
      });
    }
    for (const o of this.observed) {
      const f = this.facts.get(o.identity.container);
      if (f?.operation && !m.has(o.identity.container)) {
        m.set(o.identity.container, { busy: true, heldStopped: false, failed: false, nextAttemptAt: 0 });
      }
    }
    return m;
  }

  private async pass(): Promise<void> {
    if (this.lifecycle !== 'running' && this.lifecycle !== 'starting') return;
    if (this.passRunning) {
      this.passQueued = true;
      return;
    }
    this.passRunning = true;
    let next = this.deps.relistMs;
    try {
      try {
        this.listing += 1;
        this.observed = await this.deps.engine.listManaged(this.deps.instance);
        this.setEngine(true);
        if (!this.subscription) this.subscribe();
      } catch (err) {
        const e = toSpcdError(err);
        // Engine away: take no action until it answers again. The loop itself is alive.
        this.setEngine(false, e.message);
        next = ENGINE_RETRY_MS;
        this.deps.onHeartbeat?.();
        return;
      }
      if (this.hold) this.desired = this.hold.derive(this.observed);
      const now = this.deps.clock.now();
      await this.noteExits(now);
      this.syncHealth();
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
      this.logUntouched(p);
      this.launch(p.steps);
      const healAt = this.launchHeals(now);
      if (p.wakeAt !== undefined) next = Math.min(next, Math.max(0, p.wakeAt - now));
      if (healAt !== undefined) next = Math.min(next, Math.max(0, healAt - now));
      this.deps.onHeartbeat?.();
    } finally {
      this.passRunning = false;
      if (this.lifecycle === 'running') {
        if (this.passQueued) {
          this.passQueued = false;
          this.schedule(0);
        } else this.schedule(next);
      }
    }
  }

  /** Warns once per container (and again when the reason changes) that spcd leaves it as it is. */
  private logUntouched(p: Plan): void {
    const now = new Map((p.untouched ?? []).map((u) => [u.container, u.reason]));
    for (const [container, reason] of now) {
      if (this.untouchedLogged.get(container) !== reason)
        this.deps.log.warn({ container, reason }, 'container left as it is');
    }
    this.untouchedLogged = now;
  }

  /** Counts each exit once (by its finishedAt) toward the container's backoff. */
  private async noteExits(now: number): Promise<void> {
    for (const d of this.desired) {
      const name = d.spec.name;
      const p = this.primary(name);
      if (!p) continue;
      // A failed write (disk full) must not end the pass: the number is reserved in memory anyway.
      await this.deps.exec.state.observeGeneration(name, p.identity.generation).catch((err: unknown) => {
        this.deps.log.warn({ container: name, err: (err as Error).message }, 'cannot record generation');
      });
      const f = this.factsOf(name);
      if (this.heldDuringListing(f) || isRunning(p) || p.state === 'created' || !p.finishedAt) continue;
      if (f.lastExitSeen === p.finishedAt) continue;
      f.lastExitSeen = p.finishedAt;
      if (this.deps.exec.state.record(name)?.heldStopped) continue;
      f.backoff = recordFailure(f.backoff, now, this.backoff);
      const to = isCrashLooping(f.backoff, this.backoff) ? 'crash-looping' : 'exited';
      this.deps.log.warn(
        {
          container: name,
          exitCode: p.exitCode,
          to,
          failures: f.backoff.failures,
          restartInMs: Math.max(0, f.backoff.nextAttemptAt - now),
        },
        to === 'crash-looping' ? 'container exited again: crash-looping' : 'container exited',
      );
      this.deps.events.publish({
        type: 'state',
        at: now,
        container: name,
        from: 'running',
        to,
        reason: `exited with ${p.exitCode}`,
      });
    }
  }

  private syncHealth(): void {
    const live = new Set<string>();
    for (const d of this.desired) {
      const name = d.spec.name;
      const p = this.primary(name);
      if (!p || p.state !== 'running' || d.spec.healthchecks.length === 0) continue;
      if (this.heldDuringListing(this.factsOf(name))) {
        live.add(name);
        continue;
      }
      live.add(name);
      // One watch per started instance: a restart keeps the container's id but starts a new
      // start period and new counters.
      const instance = `${p.id}@${p.startedAt}`;
      const was = this.watched.get(name);
      if (was === instance) {
        if (p.dockerHealth) this.deps.health.update(name, { dockerHealth: p.dockerHealth });
        continue;
      }
      if (was !== undefined) this.deps.health.unwatch(name);
      this.watched.set(name, instance);
      this.deps.health.watch({
        name,
        containerId: p.id,
        pid: p.pid,
        network: d.spec.network,
        pidMode: d.spec.pid,
        startedAtMs: p.startedAt ? Date.parse(p.startedAt) : this.deps.clock.now(),
        checks: d.spec.healthchecks,
        ...(p.dockerHealth ? { dockerHealth: p.dockerHealth } : {}),
      });
    }
    for (const name of [...this.watched.keys()]) {
      if (!live.has(name)) {
        this.watched.delete(name);
        this.deps.health.unwatch(name);
      }
    }
  }

  private launch(steps: readonly Step[]): void {
    for (const s of steps) {
      if (this.tasks.size >= MAX_PARALLEL_TASKS) {
        this.passQueued = true;
        return;
      }
      const name = s.kind === 'remove' ? s.observed.identity.container : s.desired.spec.name;
      const opId = `reconcile-${randomUUID().slice(0, 8)}`;
      void this.runExclusive(name, opId, () => this.execute(s, opId)).catch((err: unknown) => {
        const e = toSpcdError(err);
        if (e.code === 'CONFLICT') return;
        const f = this.factsOf(name);
        f.lastError = { code: e.code, message: e.message, at: this.deps.clock.now() };
        f.backoff = recordFailure(f.backoff, this.deps.clock.now(), this.backoff);
        // A refused removal is retried with backoff (the VMs may be migrated); a refused change needs an operator.
        if (s.kind !== 'remove' && (e.code === 'BOOTSTRAP_FAILED' || e.code === 'VM_SAFETY_REFUSED'))
          f.failed = e.message;
        this.deps.log.warn({ container: name, step: s.kind, code: e.code, err: e.message }, 'step failed');
      });
    }
  }

  private async execute(s: Step, opId: string): Promise<void> {
    const now = this.deps.clock.now();
    switch (s.kind) {
      case 'create': {
        const f = this.factsOf(s.desired.spec.name);
        f.backoff = recordStart(f.backoff, now);
        await createContainer(this.deps.exec, s.desired, opId);
        f.lastError = null;
        return;
      }
      case 'start': {
        const f = this.factsOf(s.desired.spec.name);
        if (f.lastExitSeen) f.restartCount += 1;
        f.backoff = recordStart(f.backoff, now);
        await startContainer(this.deps.exec, s.observed, s.reason);
        return;
      }
      case 'remove':
        await removeContainer(this.deps.exec, s.observed, s.reason, s.definitionDeleted);
        return;
      case 'replace': {
        await upgradeContainer(this.deps.exec, {
          operationId: opId,
          kind: 'recreate',
          spec: s.desired.spec,
          specHash: s.desired.specHash,
          current: s.observed,
          pull: 'missing',
          reason: s.reason,
        });
        return;
      }
    }
  }

  /**
   * Unhealthy containers whose check asked for a restart, within their backoff.
   * Returns the earliest time a heal waits for, so the pass wakes up then.
   */
  private launchHeals(now: number): number | undefined {
    let wakeAt: number | undefined;
    for (const d of this.desired) {
      const at = this.launchHeal(d, now);
      if (at !== undefined) wakeAt = Math.min(wakeAt ?? Infinity, at);
    }
    return wakeAt;
  }

  /** Heals one container if it asked for it and its backoff allows; else returns when it may. */
  private launchHeal(d: DesiredContainer, now: number): number | undefined {
    const name = d.spec.name;
    const f = this.factsOf(name);
    if (!f.pendingHeal || this.heldDuringListing(f)) return undefined;
    const p = this.primary(name);
    if (!p || !isRunning(p)) {
      f.pendingHeal = null;
      return undefined;
    }
    if (f.failed) {
      // action 'stop': stop it and leave it for an operator.
      const reason = f.failed;
      f.pendingHeal = null;
      void this.runExclusive(name, `heal-${randomUUID().slice(0, 8)}`, () =>
        this.deps.exec.engine.stop(p.id, d.spec.stopGraceMs).then(() => {
          this.deps.events.publish({
            type: 'state',
            at: now,
            container: name,
            from: 'running',
            to: 'failed',
            reason,
          });
        }),
      ).catch(() => undefined);
      return undefined;
    }
    if (f.backoff.nextAttemptAt > now) return f.backoff.nextAttemptAt;
    const reason = f.pendingHeal.reason;
    f.pendingHeal = null;
    f.restartCount += 1;
    f.backoff = recordStart(f.backoff, now);
    // No probing while spcd stops and starts it; the next pass watches the new start afresh.
    this.watched.delete(name);
    this.deps.health.unwatch(name);
    this.deps.log.warn(
      { container: name, reason, failures: f.backoff.failures, restartCount: f.restartCount },
      'restarting unhealthy container',
    );
    void this.runExclusive(name, `heal-${randomUUID().slice(0, 8)}`, async () => {
      this.deps.events.publish({
        type: 'state',
        at: now,
        container: name,
        from: 'running',
        to: 'restarting',
        reason,
      });
      await this.deps.exec.engine.stop(p.id, d.spec.stopGraceMs);
      await this.deps.exec.engine.start(p.id);
    }).catch((err: unknown) => {
      const e = toSpcdError(err);
      f.lastError = { code: e.code, message: e.message, at: this.deps.clock.now() };
    });
    return undefined;
  }
}

/** Keeps the steps `allowed` accepts; the others wait, for `reason`. */
function restrict(p: Plan, allowed: (s: Step) => boolean, reason: string): Plan {
  const stepName = (s: Step): string =>
    s.kind === 'remove' ? s.observed.identity.container : s.desired.spec.name;
  return {
    ...p,
    steps: p.steps.filter(allowed),
    waiting: [
      ...p.waiting,
      ...p.steps.filter((s) => !allowed(s)).map((s) => ({ container: stepName(s), reason })),
    ],
  };
}
