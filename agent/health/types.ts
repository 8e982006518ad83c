/** The health room's public types: results, snapshots, events, probe seams. */
import type { CheckAction, CheckSpec, NetworkMode, PidMode } from '../model/spec.js';
import type { ObservedContainer } from '../model/observed.js';

export type DockerHealth = NonNullable<ObservedContainer['dockerHealth']>;

/** One probe result, as kept in a check's history. */
export interface HealthResult {
  /** When the probe started (ms epoch, injected clock). */
  readonly at: number;
  readonly ok: boolean;
  /** null for timeouts, host-side probes and inconclusive probes. */
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly durationMs: number;
  /** Tail of the output (capped at the check's maxOutputBytes). */
  readonly output: string;
  /**
   * false when the result did not move the counters: a failure inside the
   * start period, or an inconclusive probe (the engine did not answer).
   */
  readonly counted: boolean;
  /** Error code when the probe itself could not run (engine down, container gone). */
  readonly error?: string;
}

export type CheckStatus = 'healthy' | 'unhealthy' | 'starting' | 'unknown';
export type ContainerHealthStatus = CheckStatus;

export interface CheckSnapshot {
  readonly name: string;
  readonly status: CheckStatus;
  /** Set for a dependency check (CheckSpec.dependency). */
  readonly dependency?: string;
  readonly consecutiveFailures: number;
  readonly consecutiveSuccesses: number;
  readonly lastResult?: HealthResult;
  /** Oldest first, at most historySize entries. */
  readonly history: readonly HealthResult[];
}

export interface HealthSnapshot {
  readonly name: string;
  readonly containerId: string;
  /** Of the container's own (liveness) checks only; dependency checks are in `dependencies`. */
  readonly status: ContainerHealthStatus;
  /** One per dependency check, in check order (none when it has none). */
  readonly dependencies: readonly DependencyState[];
  /** True between pause() and resume(): nothing is probed. */
  readonly paused: boolean;
  readonly checks: readonly CheckSnapshot[];
  /** The image's own Docker HEALTHCHECK status, reported beside spcd's checks. */
  readonly dockerHealth?: DockerHealth;
}

/**
 * A dependency's state as a check sees it: `up` while the check is healthy,
 * `down` while it is unhealthy; while it starts afresh (a new instance), the
 * state last reported for the container (`unknown` when none was).
 */
export type DependencyStatus = 'up' | 'down' | 'unknown';

export interface DependencyState {
  readonly check: string;
  readonly dependency: string;
  readonly status: DependencyStatus;
}

/**
 * Emitted when a dependency check turns unhealthy (down) and when it is
 * healthy again after that (up): once per change of the container's
 * dependency, across its instances.
 */
export interface DependencyChange {
  readonly name: string;
  readonly containerId: string;
  readonly check: string;
  readonly dependency: string;
  readonly status: 'up' | 'down';
  readonly consecutiveFailures: number;
  /** The last result's output. */
  readonly output: string;
}

/** What watch() needs to know about one running container instance. */
export interface WatchTarget {
  readonly name: string;
  readonly containerId: string;
  /** Host PID of the container's init process (process probes start from it). */
  readonly pid: number;
  readonly network: NetworkMode;
  readonly pidMode: PidMode;
  /** When this instance started (ms epoch); the start period counts from here. */
  readonly startedAtMs: number;
  readonly checks: readonly CheckSpec[];
  readonly dockerHealth?: DockerHealth;
}

/** Published only when a container's or a check's status changes. */
export interface HealthChange {
  readonly name: string;
  readonly containerId: string;
  readonly status: ContainerHealthStatus;
  readonly previous: ContainerHealthStatus;
  /** Set when a check's status changed (absent for container-only changes such as dockerHealth). */
  readonly check?: {
    readonly name: string;
    /** Set for a dependency check: `status` is then the container's liveness, which it does not change. */
    readonly dependency?: string;
    readonly status: CheckStatus;
    readonly previous: CheckStatus;
    readonly lastResult?: HealthResult;
  };
  readonly dockerHealth?: DockerHealth;
}

/**
 * Emitted when a check reaches its failure threshold and its action is
 * restart or stop, and again every further `failureThreshold` consecutive
 * failures while it stays failing. The reconciler acts (with its backoff).
 */
export interface HealthAction {
  readonly name: string;
  readonly containerId: string;
  readonly check: string;
  readonly action: Exclude<CheckAction, 'none'>;
  readonly reason: string;
  readonly consecutiveFailures: number;
  /** Outputs of the last failing results, oldest first. */
  readonly lastOutputs: readonly string[];
}

/** What a probe returns to its worker. */
export interface ProbeOutcome {
  readonly ok: boolean;
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly output: string;
  readonly durationMs?: number;
  /** Set when the probe could not run at all: the result is recorded, not counted. */
  readonly inconclusive?: string;
}

export type ProbeFn = (signal: AbortSignal) => Promise<ProbeOutcome>;

/** Probes spcd runs itself, from the host, with no exec. Each honors its timeout. */
export interface HostProbes {
  tcp(host: string, port: number, timeoutMs: number, signal: AbortSignal): Promise<ProbeOutcome>;
  http(
    url: string,
    expectStatus: readonly number[],
    timeoutMs: number,
    maxOutputBytes: number,
    signal: AbortSignal,
  ): Promise<ProbeOutcome>;
  process(
    comm: string,
    target: { readonly containerId: string; readonly pid: number },
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<ProbeOutcome>;
  /** Kolla's healthcheck_port meaning, from /proc (see agent/health/proc.ts). */
  established(
    process: string,
    ports: readonly number[],
    target: { readonly containerId: string; readonly pid: number },
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<ProbeOutcome>;
}
