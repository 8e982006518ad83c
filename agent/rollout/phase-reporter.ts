/**
 * PhaseReporter: publishes one node's phase through the backend without ever
 * making the rollout wait for it. The newest report wins, one write at a
 * time, each written `settleMs` after it was made: a slot is never held for a
 * status write, and quick successive phases (a pull of images already there,
 * a queue met by a free slot, a short swap) cost one request. A failed write
 * is retried later unless a newer report came; flush() writes the newest at
 * once and waits for it.
 */
import { isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { RolloutBackend } from './backend.js';
import type { PhaseReport } from './decide.js';

export interface PhaseReporterDeps {
  readonly backend: Pick<RolloutBackend, 'writePhase'>;
  readonly clock: Clock;
  readonly log: Logger;
  /** How long a report waits before it is written; 0 writes at once. */
  readonly settleMs: number;
  /** The pause before a failed write is tried again. */
  readonly retryDelay: () => number;
}

export class PhaseReporter {
  /** The newest report made (written or not): what this node last said it was doing. */
  last: PhaseReport | undefined;
  private unwritten: PhaseReport | undefined;
  private writing: Promise<void> | undefined;
  /** The pending settle (or retry) timer before the next write. */
  private timer: { cancel(): void; retry: boolean } | undefined;
  private stopped = false;

  constructor(private readonly d: PhaseReporterDeps) {}

  /** Reports r, unless it says what the last report said (same rollout, target, phase and reason). */
  report(r: PhaseReport): void {
    const l = this.last;
    if (l && l.rollout === r.rollout && l.target === r.target && l.phase === r.phase && l.reason === r.reason)
      return;
    this.last = r;
    this.unwritten = r;
    this.schedule();
  }

  /** No more retries of a failed write (the node stops). */
  stop(): void {
    this.stopped = true;
  }

  /** Writes the newest report now, unless it waits to be retried, and resolves once it is written (or failed). */
  async flush(): Promise<void> {
    for (;;) {
      if (this.timer && !this.timer.retry) this.write();
      if (!this.writing) return;
      await this.writing;
    }
  }

  private schedule(): void {
    if (this.writing || this.timer || !this.unwritten) return;
    if (this.d.settleMs <= 0) return this.write();
    this.setTimer(this.d.settleMs, false);
  }

  private setTimer(ms: number, retry: boolean): void {
    const cancel = this.d.clock.setTimer(ms, () => {
      this.timer = undefined;
      this.write();
    });
    this.timer = { cancel, retry };
  }

  private write(): void {
    const r = this.unwritten;
    if (this.writing || !r) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.unwritten = undefined;
    let failed = false;
    this.writing = this.d.backend
      .writePhase(r)
      .catch((err: unknown) => {
        this.d.log.warn(
          { phase: r.phase, code: isSpcdError(err) ? err.code : 'INTERNAL' },
          'phase report failed; retrying',
        );
        // The last report must reach the cluster (a node done while it was unreachable
        // would show upgrading for ever): written again later, unless a newer one came.
        if (this.stopped || this.unwritten) return;
        failed = true;
        this.unwritten = r;
        this.setTimer(this.d.retryDelay(), true);
      })
      .finally(() => {
        this.writing = undefined;
        if (!failed) this.schedule(); // a newer report arrived meanwhile
      });
  }
}
