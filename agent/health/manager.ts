/**
 * The health manager: owns the workers of every watched container, keeps
 * their results, publishes status changes only, emits failure actions for the
 * reconciler to perform, and offers the upgrade health gate (waitHealthy).
 * It never calls the engine to restart anything. Dependency checks
 * (CheckSpec.dependency) ask for no action, count in neither the container's
 * status nor the gate, and report their dependency down and up instead.
 */
import { SpcdError } from '../errors.js';
import type { ExecEngine } from '../engine/types.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { isDependencyCheck, type CheckSpec } from '../model/spec.js';
import { DependencyReports } from './dependencies.js';
import { realHostProbes } from './host-probes.js';
import { hostProbeProblem, makeProbe } from './probe.js';
import { makeSchedule } from './schedule.js';
import { aggregateStatus } from './status.js';
import type {
  ContainerHealthStatus,
  DependencyChange,
  DependencyState,
  DockerHealth,
  HealthAction,
  HealthChange,
  HealthSnapshot,
  HostProbes,
  WatchTarget,
} from './types.js';
import { CheckWorker } from './worker.js';

export interface HealthManagerDeps {
  readonly exec: ExecEngine;
  readonly clock: Clock;
  readonly log: Logger;
  /** Uniform in [0, 1); used for first-run jitter. */
  readonly random?: () => number;
  /** Results kept per check (default 20). */
  readonly historySize?: number;
  readonly hostProbes?: HostProbes;
}

interface Entry {
  target: WatchTarget;
  workers: Map<string, CheckWorker>;
  status: ContainerHealthStatus;
  dockerHealth: DockerHealth | undefined;
}

interface Waiter {
  name: string;
  containerId: string;
  settle(err?: SpcdError): void;
}

export class HealthManager {
  private readonly entries = new Map<string, Entry>();
  private readonly paused = new Set<string>();
  private readonly changeListeners = new Set<(c: HealthChange) => void>();
  private readonly actionListeners = new Set<(a: HealthAction) => void>();
  private readonly failureListeners = new Set<(name: string, check: string) => void>();
  private readonly dependencyListeners = new Set<(d: DependencyChange) => void>();
  private readonly reports = new DependencyReports();
  private readonly waiters = new Set<Waiter>();
  private readonly random: () => number;
  private readonly historySize: number;
  private readonly hostProbes: HostProbes;
  private closed = false;

  constructor(private readonly deps: HealthManagerDeps) {
    this.random = deps.random ?? Math.random;
    this.historySize = deps.historySize ?? 20;
    this.hostProbes = deps.hostProbes ?? realHostProbes;
  }

  /** (Re)starts the workers of a container instance; a new containerId replaces the old workers. */
  watch(target: WatchTarget): void {
    if (this.closed) throw new SpcdError('SHUTTING_DOWN', 'health manager is closed');
    const old = this.entries.get(target.name);
    const entry: Entry = {
      target,
      workers: new Map(),
      status: old?.status ?? 'unknown',
      dockerHealth:
        target.dockerHealth ??
        (old?.target.containerId === target.containerId ? old.dockerHealth : undefined),
    };
    const sameInstance = old?.target.containerId === target.containerId;
    for (const check of target.checks) {
      const prev = sameInstance ? old.workers.get(check.name) : undefined;
      if (old && prev && sameCheck(prev.check, check)) {
        entry.workers.set(check.name, prev);
        old.workers.delete(check.name);
      } else {
        entry.workers.set(check.name, this.makeWorker(entry, check));
      }
    }
    if (old) for (const w of old.workers.values()) void w.stop();
    this.reports.keep(target.name, new Set(target.checks.filter(isDependencyCheck).map((c) => c.name)));
    this.entries.set(target.name, entry);
    const paused = this.paused.has(target.name);
    for (const w of entry.workers.values()) w.start(paused);
    this.refresh(entry, undefined);
  }

  /** Updates what the engine reports beside spcd's own checks. */
  update(name: string, patch: { readonly containerId?: string; readonly dockerHealth?: DockerHealth }): void {
    const e = this.entries.get(name);
    if (!e || (patch.containerId !== undefined && patch.containerId !== e.target.containerId)) return;
    if (patch.dockerHealth === e.dockerHealth) return;
    e.dockerHealth = patch.dockerHealth;
    this.publish({
      name,
      containerId: e.target.containerId,
      status: e.status,
      previous: e.status,
      ...(e.dockerHealth ? { dockerHealth: e.dockerHealth } : {}),
    });
  }

  unwatch(name: string): void {
    const e = this.entries.get(name);
    if (!e) return;
    this.entries.delete(name);
    for (const w of e.workers.values()) void w.stop();
    this.checkWaiters();
  }

  /** No probing while spcd stops, starts or upgrades this container; in-flight results are discarded. */
  pause(name: string): void {
    this.paused.add(name);
    for (const w of this.entries.get(name)?.workers.values() ?? []) w.pause();
  }

  resume(name: string): void {
    this.paused.delete(name);
    for (const w of this.entries.get(name)?.workers.values() ?? []) w.resume();
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  snapshot(name: string): HealthSnapshot | undefined {
    const e = this.entries.get(name);
    if (!e) return undefined;
    return {
      name,
      containerId: e.target.containerId,
      status: e.status,
      paused: this.paused.has(name),
      dependencies: this.dependencyStates(name, e),
      checks: [...e.workers.values()].map((w) => w.snapshot()),
      ...(e.dockerHealth ? { dockerHealth: e.dockerHealth } : {}),
    };
  }

  /** Called only when a container's or a check's status changes. */
  onChange(listener: (c: HealthChange) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Called when a check with action restart|stop crosses its failure threshold. */
  onAction(listener: (a: HealthAction) => void): () => void {
    this.actionListeners.add(listener);
    return () => this.actionListeners.delete(listener);
  }

  /** Called for every counted failed result of a check (the failures metric). */
  onFailure(listener: (name: string, check: string) => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  /** Called when a dependency check reports its dependency down, and up again after that. */
  onDependency(listener: (d: DependencyChange) => void): () => void {
    this.dependencyListeners.add(listener);
    return () => this.dependencyListeners.delete(listener);
  }

  /** Every watched container's dependency checks and what they show (the metric). */
  dependencies(): { readonly container: string; readonly states: readonly DependencyState[] }[] {
    return [...this.entries].map(([container, e]) => ({
      container,
      states: this.dependencyStates(container, e),
    }));
  }

  /**
   * Resolves when every liveness check of this container instance is
   * healthy (at once when it has none; dependency checks take no part).
   * Rejects with HEALTH_GATE_FAILED, details {lastResults}, when a liveness
   * check turns unhealthy, at deadlineMs (absolute ms on the injected clock),
   * or when signal aborts.
   */
  waitHealthy(name: string, containerId: string, deadlineMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.closed) return reject(new SpcdError('SHUTTING_DOWN', 'health manager is closed'));
      let cancelTimer: () => void = () => undefined;
      const onAbort = (): void =>
        waiter.settle(this.gateError(name, containerId, 'the health gate was cancelled'));
      const waiter: Waiter = {
        name,
        containerId,
        settle: (err) => {
          if (!this.waiters.delete(waiter)) return;
          cancelTimer();
          signal?.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve();
        },
      };
      this.waiters.add(waiter);
      cancelTimer = this.deps.clock.setTimer(Math.max(0, deadlineMs - this.deps.clock.now()), () =>
        waiter.settle(this.gateError(name, containerId, 'not healthy before the deadline')),
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.checkWaiter(waiter);
    });
  }

  /** Stops every worker, cancels timers and aborts in-flight probes (which kills their execs). */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.waiters]) w.settle(new SpcdError('SHUTTING_DOWN', 'health manager is closing'));
    const stops: Promise<void>[] = [];
    for (const e of this.entries.values()) for (const w of e.workers.values()) stops.push(w.stop());
    this.entries.clear();
    await Promise.allSettled(stops);
  }

  private makeWorker(entry: Entry, check: CheckSpec): CheckWorker {
    const target = entry.target;
    const problem = hostProbeProblem(check, target);
    return new CheckWorker({
      check,
      containerId: target.containerId,
      startedAtMs: target.startedAtMs,
      probe: makeProbe(check, target, this.deps.exec, this.hostProbes),
      schedule: makeSchedule(check.schedule, this.random),
      clock: this.deps.clock,
      log: this.deps.log.child({ container: target.name, check: check.name }),
      historySize: this.historySize,
      ...(problem ? { misconfigured: problem } : {}),
      hooks: {
        onStatus: (w, previous) => {
          const cur = this.current(target.name, w);
          if (!cur) return;
          this.reportDependency(target, w);
          this.refresh(cur, {
            name: w.check.name,
            ...(w.check.dependency !== undefined ? { dependency: w.check.dependency } : {}),
            status: w.checkStatus,
            previous,
            lastResult: w.snapshot().lastResult,
          });
        },
        onFailure: (w) => {
          if (!this.current(target.name, w)) return;
          for (const l of this.failureListeners) safely(() => l(target.name, w.check.name), this.deps.log);
        },
        onThreshold: (w) => {
          if (!this.current(target.name, w)) return;
          if (w.check.action === 'none' || isDependencyCheck(w.check)) return;
          const action: HealthAction = {
            name: target.name,
            containerId: target.containerId,
            check: w.check.name,
            action: w.check.action,
            consecutiveFailures: w.failures,
            reason: `check ${w.check.name} failed ${w.failures} times in a row (threshold ${w.check.failureThreshold})`,
            lastOutputs: w.lastOutputs(w.check.failureThreshold),
          };
          this.deps.log.warn({ action }, 'health check crossed its failure threshold');
          for (const l of this.actionListeners) safely(() => l(action), this.deps.log);
        },
      },
    });
  }

  /** The entry that still owns this worker, if any (a replaced worker's events are dropped). */
  private current(name: string, w: CheckWorker): Entry | undefined {
    const e = this.entries.get(name);
    return e && e.workers.get(w.check.name) === w ? e : undefined;
  }

  private reportDependency(target: WatchTarget, w: CheckWorker): void {
    const dependency = w.check.dependency;
    if (dependency === undefined) return;
    const status = this.reports.change(target.name, w.check.name, w.checkStatus);
    if (!status) return;
    const change: DependencyChange = {
      name: target.name,
      containerId: target.containerId,
      check: w.check.name,
      dependency,
      status,
      consecutiveFailures: w.failures,
      output: w.snapshot().lastResult?.output ?? '',
    };
    this.deps.log[status === 'down' ? 'warn' : 'info'](
      { dependency: change },
      `dependency ${dependency} ${status}`,
    );
    for (const l of this.dependencyListeners) safely(() => l(change), this.deps.log);
  }

  private dependencyStates(name: string, e: Entry): DependencyState[] {
    return this.reports.states(
      name,
      [...e.workers.values()].map((w) => [w.check, w.checkStatus] as const),
    );
  }

  private refresh(entry: Entry, check: HealthChange['check']): void {
    const previous = entry.status;
    entry.status = aggregateStatus(liveness(entry).map((w) => w.checkStatus));
    if (check || entry.status !== previous) {
      this.publish({
        name: entry.target.name,
        containerId: entry.target.containerId,
        status: entry.status,
        previous,
        ...(check ? { check } : {}),
        ...(entry.dockerHealth ? { dockerHealth: entry.dockerHealth } : {}),
      });
    }
    this.checkWaiters();
  }

  private publish(c: HealthChange): void {
    for (const l of this.changeListeners) safely(() => l(c), this.deps.log);
  }

  private checkWaiters(): void {
    for (const w of [...this.waiters]) this.checkWaiter(w);
  }

  private checkWaiter(w: Waiter): void {
    const e = this.entries.get(w.name);
    if (!e || e.target.containerId !== w.containerId) return;
    const statuses = liveness(e).map((x) => x.checkStatus);
    if (statuses.every((s) => s === 'healthy')) w.settle();
    else if (statuses.includes('unhealthy'))
      w.settle(this.gateError(w.name, w.containerId, 'a check turned unhealthy'));
  }

  private gateError(name: string, containerId: string, why: string): SpcdError {
    const e = this.entries.get(name);
    const lastResults =
      e && e.target.containerId === containerId
        ? [...e.workers.values()].map((w) => {
            const s = w.snapshot();
            return {
              check: s.name,
              status: s.status,
              lastResult: s.lastResult ?? null,
              history: s.history.slice(-3),
            };
          })
        : [];
    return new SpcdError('HEALTH_GATE_FAILED', `${name}: ${why}`, { name, containerId, lastResults });
  }
}

/** The container's own checks: a dependency check says nothing of its liveness. */
function liveness(e: Entry): CheckWorker[] {
  return [...e.workers.values()].filter((w) => !isDependencyCheck(w.check));
}

function sameCheck(a: CheckSpec, b: CheckSpec): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function safely(fn: () => void, log: Logger): void {
  try {
    fn();
  } catch (err) {
    log.error({ err }, 'health listener threw');
  }
}
