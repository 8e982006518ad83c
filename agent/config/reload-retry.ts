import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';

/**
 * Why a reload may fail and be worth trying again by itself: the state or
 * config disk was full or failing for a while. A SIGHUP has no one to answer,
 * so without this the definitions on disk would stay unapplied until the next
 * reload. Other failures (a bad definition, an insecure file) wait for the
 * operator's fix and reload.
 */
export const PASSING_RELOAD_FAILURES: ReadonlySet<string> = new Set([
  'STATE_WRITE_FAILED',
  'CONFIG_WRITE_FAILED',
]);

/** Tries a failed reload again with backoff, until one succeeds or another reload begins. */
export class ReloadRetry {
  private cancel: (() => void) | undefined;
  private delayMs: number;

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly attempt: () => Promise<unknown>,
    private readonly firstMs = 2_000,
    private readonly maxMs = 60_000,
  ) {
    this.delayMs = firstMs;
  }

  /** A reload begins: it supersedes any retry still waiting. */
  begin(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  succeeded(): void {
    this.delayMs = this.firstMs;
  }

  failed(code: string): void {
    if (!PASSING_RELOAD_FAILURES.has(code)) {
      this.delayMs = this.firstMs;
      return;
    }
    const ms = this.delayMs;
    this.delayMs = Math.min(this.maxMs, ms * 2);
    this.log.warn({ code, retryInMs: ms }, 'reload failed for a passing reason: trying it again');
    this.cancel = this.clock.setTimer(ms, () => {
      this.cancel = undefined;
      void this.attempt().catch(() => undefined);
    });
  }

  close(): void {
    this.begin();
  }
}
