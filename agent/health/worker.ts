/**
 * One worker per (container instance, check): a loop around one probe step
 * (kubelet's prober worker shape). Its state is a few counters. At most one
 * probe is in flight; a probe that does not settle by timeout + grace is
 * counted as a timed-out failure and aborted, and no new one starts until it
 * settles. Results of a probe started before pause()/stop() are discarded.
 */
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { CheckSpec } from '../model/spec.js';
import type { Schedule } from './schedule.js';
import type { CheckSnapshot, CheckStatus, HealthResult, ProbeFn, ProbeOutcome } from './types.js';
import { escapeControl } from '../model/text.js';

/** How long past its timeout a probe may take before the worker gives up on it. */
export const PROBE_GRACE_MS = 2_000;
/** The longest single timer (setTimeout's limit); longer waits are re-armed. */
const MAX_TIMER_MS = 2_147_483_647;

export type WorkerState = 'idle' | 'scheduled' | 'probing' | 'paused' | 'stopped';

export interface WorkerHooks {
  /** The check's status changed. */
  onStatus(worker: CheckWorker, previous: CheckStatus): void;
  /** consecutiveFailures reached the threshold (or another multiple of it). */
  onThreshold(worker: CheckWorker): void;
  /** A failed result was counted (not one in the start period, not an inconclusive one). */
  onFailure?(worker: CheckWorker): void;
}

export interface WorkerOptions {
  readonly check: CheckSpec;
  readonly containerId: string;
  readonly startedAtMs: number;
  readonly probe: ProbeFn;
  readonly schedule: Schedule;
  readonly clock: Clock;
  readonly log: Logger;
  readonly historySize: number;
  readonly hooks: WorkerHooks;
  /** Set when the probe cannot run for this container: the check stays "unknown" with this reason. */
  readonly misconfigured?: string;
}

export class CheckWorker {
  readonly check: CheckSpec;
  private state: WorkerState = 'idle';
  private status: CheckStatus = 'starting';
  private consecutiveFailures = 0;
  private consecutiveSuccesses = 0;
  private readonly history: HealthResult[] = [];
  private startPeriodOver = false;
  private cancelTimer: (() => void) | undefined;
  private inFlight: { abort: AbortController; settled: Promise<void> } | undefined;
  /** Bumped by pause/stop: a probe from an older epoch has its result discarded. */
  private epoch = 0;
  private lastStartAt: number | undefined;
  /** Probes skipped because the previous one was still in flight. */
  skipped = 0;

  constructor(private readonly o: WorkerOptions) {
    this.check = o.check;
    if (o.misconfigured) {
      this.status = 'unknown';
      this.record(
        {
          ok: false,
          exitCode: null,
          timedOut: false,
          output: o.misconfigured,
          inconclusive: 'CHECK_INVALID',
        },
        o.clock.now(),
      );
    }
  }

  get workerState(): WorkerState {
    return this.state;
  }

  get checkStatus(): CheckStatus {
    return this.status;
  }

  start(paused: boolean): void {
    if (this.state !== 'idle') return;
    if (this.o.misconfigured) {
      this.state = 'paused';
      return;
    }
    if (paused) {
      this.state = 'paused';
      return;
    }
    this.arm(this.firstAt());
  }

  pause(): void {
    if (this.state === 'stopped' || this.o.misconfigured) return;
    this.epoch++;
    this.clearTimer();
    this.inFlight?.abort.abort();
    this.state = 'paused';
  }

  resume(): void {
    if (this.state !== 'paused' || this.o.misconfigured) return;
    this.state = 'idle';
    this.arm(this.firstAt());
  }

  /** Within the start period, before the first success, with a start_interval: the fast start-up cadence. */
  private starting(now: number): number | undefined {
    const si = this.check.startIntervalMs;
    return si !== undefined && !this.startPeriodOver && now < this.o.startedAtMs + this.check.startPeriodMs
      ? si
      : undefined;
  }

  /** At once while starting (no jitter: a gate waits on it), else the schedule's first run. */
  private firstAt(): number {
    const now = this.o.clock.now();
    return this.starting(now) !== undefined ? now : this.o.schedule.first(now);
  }

  /** Stops for good; resolves once an in-flight probe (now aborted) has settled. */
  stop(): Promise<void> {
    this.epoch++;
    this.state = 'stopped';
    this.clearTimer();
    this.o.schedule.close();
    const f = this.inFlight;
    f?.abort.abort();
    return f ? f.settled : Promise.resolve();
  }

  snapshot(): CheckSnapshot {
    const last = this.history[this.history.length - 1];
    return {
      name: this.check.name,
      status: this.status,
      ...(this.check.dependency !== undefined ? { dependency: this.check.dependency } : {}),
      consecutiveFailures: this.consecutiveFailures,
      consecutiveSuccesses: this.consecutiveSuccesses,
      ...(last ? { lastResult: last } : {}),
      history: [...this.history],
    };
  }

  /** Outputs of the last n results, oldest first. */
  lastOutputs(n: number): string[] {
    return this.history.slice(-n).map((r) => r.output);
  }

  private clearTimer(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private arm(at: number): void {
    if (this.state === 'stopped' || this.state === 'paused') return;
    this.clearTimer();
    if (at >= Number.MAX_SAFE_INTEGER) {
      this.state = 'idle'; // a cron expression that never matches
      return;
    }
    this.state = this.inFlight ? 'probing' : 'scheduled';
    const delay = Math.max(0, at - this.o.clock.now());
    this.cancelTimer = this.o.clock.setTimer(Math.min(delay, MAX_TIMER_MS), () => {
      this.cancelTimer = undefined;
      if (this.o.clock.now() < at) this.arm(at);
      else this.tick();
    });
  }

  private armNext(): void {
    const now = this.o.clock.now();
    const last = this.lastStartAt ?? now;
    const next = this.o.schedule.next(last, now);
    const si = this.starting(now);
    this.arm(si === undefined ? next : Math.min(next, last + si));
  }

  private tick(): void {
    if (this.state === 'stopped' || this.state === 'paused') return;
    if (this.inFlight) {
      // At most one probe in flight: skip this turn.
      this.skipped++;
      this.lastStartAt = this.o.clock.now();
      this.armNext();
      return;
    }
    this.runProbe();
  }

  private runProbe(): void {
    const epoch = this.epoch;
    const abort = new AbortController();
    const startedAt = this.o.clock.now();
    this.lastStartAt = startedAt;
    this.state = 'probing';
    let counted = false;
    const timeoutMs = this.check.timeoutMs;
    // The worker's own deadline, in case a probe does not honor its timeout.
    const cancelGuard = this.o.clock.setTimer(timeoutMs + PROBE_GRACE_MS, () => {
      if (counted || epoch !== this.epoch) return;
      counted = true;
      abort.abort();
      this.o.log.warn(
        { check: this.check.name, containerId: this.o.containerId },
        'probe did not settle after its timeout',
      );
      this.record(
        { ok: false, exitCode: null, timedOut: true, output: `no result within ${timeoutMs} ms` },
        startedAt,
      );
      this.armNext();
    });
    let probe: Promise<ProbeOutcome>;
    try {
      probe = this.o.probe(abort.signal);
    } catch (err) {
      probe = Promise.reject(err);
    }
    const settled = probe
      .catch((err: unknown): ProbeOutcome => ({
        ok: false,
        exitCode: null,
        timedOut: false,
        output: err instanceof Error ? err.message : String(err),
        inconclusive: 'INTERNAL',
      }))
      .then((out) => {
        cancelGuard();
        this.inFlight = undefined;
        if (epoch !== this.epoch || this.state === 'stopped' || this.state === 'paused') return;
        if (!counted) {
          counted = true;
          this.record(out, startedAt);
          this.armNext();
        } else {
          this.state = this.cancelTimer ? 'scheduled' : this.state;
        }
      });
    this.inFlight = { abort, settled };
  }

  private record(out: ProbeOutcome, startedAt: number): void {
    const now = this.o.clock.now();
    const c = this.check;
    const inStartPeriod = !this.startPeriodOver && now < this.o.startedAtMs + c.startPeriodMs;
    const countable = out.inconclusive === undefined && (out.ok || !inStartPeriod);
    const result: HealthResult = {
      at: startedAt,
      ok: out.ok,
      exitCode: out.exitCode,
      timedOut: out.timedOut,
      durationMs: out.durationMs ?? now - startedAt,
      // container-controlled text: escaped once here, so status, events, logs and the CLI never carry raw controls
      output: escapeControl(out.output, { keepLines: true }),
      counted: countable,
      ...(out.inconclusive !== undefined ? { error: out.inconclusive } : {}),
    };
    this.history.push(result);
    if (this.history.length > this.o.historySize)
      this.history.splice(0, this.history.length - this.o.historySize);
    if (!countable) return;

    const previous = this.status;
    let crossed = false;
    if (out.ok) {
      this.startPeriodOver = true; // a success ends the start period early, as in Docker
      this.consecutiveSuccesses++;
      this.consecutiveFailures = 0;
      if (this.status !== 'healthy' && this.consecutiveSuccesses >= c.successThreshold)
        this.status = 'healthy';
    } else {
      this.o.hooks.onFailure?.(this);
      this.consecutiveFailures++;
      this.consecutiveSuccesses = 0;
      if (this.consecutiveFailures >= c.failureThreshold) {
        this.status = 'unhealthy';
        crossed = (this.consecutiveFailures - c.failureThreshold) % c.failureThreshold === 0;
      }
    }
    if (this.status !== previous) this.o.hooks.onStatus(this, previous);
    if (crossed) this.o.hooks.onThreshold(this);
  }

  get failures(): number {
    return this.consecutiveFailures;
  }
}
