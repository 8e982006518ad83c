/**
 * Restart backoff as pure data. The first restart is immediate (a crash of a
 * compute service should cost as little as possible); then the delay doubles
 * from `baseMs` up to `capMs`. A container that ran `stableMs` without
 * failing resets to zero. `crashLoopAfter` failures in a row mark it
 * crash-looping: still retried at the cap, and reported.
 */
export interface BackoffPolicy {
  readonly baseMs: number;
  readonly capMs: number;
  readonly stableMs: number;
  readonly crashLoopAfter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = {
  baseMs: 1_000,
  capMs: 60_000,
  stableMs: 60_000,
  crashLoopAfter: 5,
};

export interface BackoffState {
  /** Failures in a row (exits or unhealthy restarts without a stable run between). */
  readonly failures: number;
  /** Earliest time the next restart may happen. */
  readonly nextAttemptAt: number;
  /** When spcd last started it (ms), 0 if never. */
  readonly lastStartAt: number;
}

export const FRESH_BACKOFF: BackoffState = { failures: 0, nextAttemptAt: 0, lastStartAt: 0 };

export function delayFor(failures: number, p: BackoffPolicy): number {
  if (failures <= 1) return 0;
  return Math.min(p.capMs, p.baseMs * 2 ** Math.min(30, failures - 2));
}

/** A failure (exit or unhealthy) observed at `now`. */
export function recordFailure(s: BackoffState, now: number, p: BackoffPolicy): BackoffState {
  const ranStable = s.lastStartAt > 0 && now - s.lastStartAt >= p.stableMs;
  const failures = ranStable ? 1 : s.failures + 1;
  return { ...s, failures, nextAttemptAt: now + delayFor(failures, p) };
}

export function recordStart(s: BackoffState, now: number): BackoffState {
  return { ...s, lastStartAt: now };
}

export function isCrashLooping(s: BackoffState, p: BackoffPolicy): boolean {
  return s.failures >= p.crashLoopAfter;
}
