import type { SpcdError } from '../errors.js';
import {
  delayFor,
  FRESH_BACKOFF,
  isCrashLooping,
  recordFailure,
  recordStart,
  type BackoffPolicy,
  type BackoffState,
} from '../model/backoff.js';

/** What spcd remembers of one container between passes (moby's restart manager, per container). */
export interface LedgerEntry {
  readonly backoff: BackoffState;
  /** Why spcd stopped trying (a refused change, a check whose action is stop); null while it tries. */
  readonly failed: string | null;
  readonly lastError: { readonly code: string; readonly message: string; readonly at: number } | null;
  readonly restartCount: number;
  /** finishedAt of the last exit already counted. */
  readonly lastExitSeen: string;
  /** A health check asked for a restart (or a stop) that has not been carried out yet. */
  readonly pendingHeal: { readonly reason: string } | null;
  /**
   * Replacements that failed in a row, and the earliest time the changed
   * definition is tried again (0: at once). Apart from `backoff`, so that a
   * failing replacement never holds back the restart of the old instance.
   */
  readonly change: { readonly failures: number; readonly retryAt: number };
}

const NO_CHANGE_FAILED = { failures: 0, retryAt: 0 };

/** A desired container, as far as the ledger compares definitions. */
interface Defined {
  readonly spec: { readonly name: string };
  readonly specHash: string;
}

const FRESH: LedgerEntry = {
  backoff: FRESH_BACKOFF,
  failed: null,
  lastError: null,
  restartCount: 0,
  lastExitSeen: '',
  pendingHeal: null,
  change: NO_CHANGE_FAILED,
};

/**
 * The per-container ledger: exits, restarts, backoff and failure state. It
 * is the only writer of these facts; everyone else reads entries (frozen
 * snapshots) and reports events to it by name.
 */
export class ContainerLedger {
  private readonly entries = new Map<string, LedgerEntry>();

  constructor(private readonly policy: BackoffPolicy) {}

  /** The container's entry as it stands (a fresh one for a container never seen). */
  of(name: string): LedgerEntry {
    return this.entries.get(name) ?? FRESH;
  }

  crashLooping(name: string): boolean {
    return isCrashLooping(this.of(name).backoff, this.policy);
  }

  private set(name: string, patch: Partial<LedgerEntry>): LedgerEntry {
    const next = Object.freeze({ ...this.of(name), ...patch });
    this.entries.set(name, next);
    return next;
  }

  /**
   * An exit the engine shows, counted once by its finishedAt. Returns the
   * backoff after counting it, or undefined when it was already counted or
   * the container is stopped by the operator (seen, not a failure).
   */
  exited(name: string, finishedAt: string, now: number, operatorStopped: boolean): BackoffState | undefined {
    const e = this.of(name);
    if (e.lastExitSeen === finishedAt) return undefined;
    this.set(name, { lastExitSeen: finishedAt });
    if (operatorStopped) return undefined;
    return this.set(name, { backoff: recordFailure(e.backoff, now, this.policy) }).backoff;
  }

  /** spcd created it (a first start). */
  created(name: string, now: number): void {
    this.set(name, { backoff: recordStart(this.of(name).backoff, now) });
  }

  /** spcd started an existing container again; it counts as a restart once the container has exited before. */
  started(name: string, now: number): void {
    const e = this.of(name);
    this.set(name, {
      backoff: recordStart(e.backoff, now),
      restartCount: e.lastExitSeen ? e.restartCount + 1 : e.restartCount,
    });
  }

  /** A health check failed: `stop` marks it failed; `restart` counts a failure toward its backoff. */
  unhealthy(name: string, action: 'stop' | 'restart', failure: string, reason: string, now: number): void {
    const e = this.of(name);
    this.set(name, {
      ...(action === 'stop' ? { failed: failure } : { backoff: recordFailure(e.backoff, now, this.policy) }),
      pendingHeal: { reason },
    });
  }

  /** Takes the pending heal (it is being carried out, or is moot); returns its reason. */
  takeHeal(name: string): string | undefined {
    const reason = this.of(name).pendingHeal?.reason;
    if (reason !== undefined) this.set(name, { pendingHeal: null });
    return reason;
  }

  /** A heal restart begins. */
  healing(name: string, now: number): LedgerEntry {
    const e = this.of(name);
    return this.set(name, { restartCount: e.restartCount + 1, backoff: recordStart(e.backoff, now) });
  }

  /** An operation on it failed: its error is shown until one succeeds. */
  errored(name: string, e: SpcdError, now: number): void {
    this.set(name, { lastError: { code: e.code, message: e.message, at: now } });
  }

  /**
   * A step the reconciler ran failed: shown, counted toward its backoff, and
   * when `fail` gives a reason, spcd stops trying until an operator acts. A
   * failed replacement (`change`) counts toward its own backoff instead.
   */
  stepFailed(name: string, e: SpcdError, now: number, fail: string | null, change = false): void {
    const e0 = this.of(name);
    const failures = e0.change.failures + 1;
    this.set(name, {
      lastError: { code: e.code, message: e.message, at: now },
      ...(change
        ? { change: { failures, retryAt: now + delayFor(failures + 1, this.policy) } }
        : { backoff: recordFailure(e0.backoff, now, this.policy) }),
      ...(fail !== null ? { failed: fail } : {}),
    });
  }

  /** A replacement succeeded: the next change is tried at once. */
  changed(name: string): void {
    this.set(name, { change: NO_CHANGE_FAILED, lastError: null });
  }

  /** The last error no longer holds (a create succeeded, a quarantine cleared). */
  errorCleared(name: string): void {
    this.set(name, { lastError: null });
  }

  /**
   * New definitions replace `before` (a reload): a container whose own
   * definition changed is the operator's act, and spcd tries it at once, even
   * what it had given up on (a definition the engine refused, a failed
   * bootstrap) or a replacement waiting for its backoff.
   */
  definitionsReplaced(before: readonly Defined[], after: readonly Defined[]): void {
    const was = new Map(before.map((d) => [d.spec.name, d.specHash]));
    for (const { spec, specHash } of after) {
      const old = was.get(spec.name);
      const e = this.of(spec.name);
      if (old !== undefined && old !== specHash && (e.failed !== null || e.change.failures > 0))
        this.set(spec.name, { failed: null, change: NO_CHANGE_FAILED });
    }
  }

  /** The operator started it: spcd tries again, and a pending heal is moot. */
  operatorStarted(name: string): void {
    this.set(name, { failed: null, pendingHeal: null });
  }
}
