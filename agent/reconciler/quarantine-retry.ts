import { randomUUID } from 'node:crypto';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { recoverJournal, retryQuarantined } from '../executor/recover.js';
import type { ExecutorDeps } from '../executor/ports.js';
import type { LockingOperation } from './locks.js';
import type { QuarantineBook } from './quarantine.js';

/** The first retry of a state-write quarantine, doubled after each failed one up to the cap. */
export const STATE_WRITE_RETRY_MS = 5_000;
export const STATE_WRITE_RETRY_CAP_MS = 120_000;

export interface QuarantineRetryDeps {
  readonly book: QuarantineBook;
  readonly exec: ExecutorDeps;
  readonly clock: Clock;
  readonly log: Logger;
  readonly locked: (name: string) => boolean;
  readonly runExclusive: <T>(name: string, op: LockingOperation, fn: () => Promise<T>) => Promise<T>;
  /**
   * The container leaves quarantine: its ledger forgets the error, and the
   * desired containers are taken again (a change the retry committed may
   * have moved a pin) before it is planned again.
   */
  readonly cleared: (name: string) => Promise<void>;
}

/**
 * Tries quarantined containers again. On reload (the operator's word): all of
 * them. By itself: only one quarantined by a failed write to the state
 * directory (a full disk), first after STATE_WRITE_RETRY_MS, then twice as
 * long after each try that fails again, up to the cap. Every try runs the
 * journal's recovery with the container locked, as a reload's does.
 */
export class QuarantineRetry {
  /** The next automatic try of each state-write quarantine, and the wait that led to it. */
  private readonly due = new Map<string, { at: number; waitMs: number }>();
  private readonly trying = new Set<string>();

  constructor(private readonly deps: QuarantineRetryDeps) {}

  /**
   * Before the first pass, entry by entry: one that cannot be finished or
   * undone is quarantined, the others go on. Resolves with how many upgrades
   * it committed (rolled forward or finished).
   */
  async recoverAtStart(): Promise<number> {
    const rec = await recoverJournal(this.deps.exec);
    for (const q of rec.quarantined) this.deps.book.add(q);
    if (rec.undone.length || rec.rolledForward.length || rec.finished.length || rec.quarantined.length)
      this.deps.log.warn(
        {
          undone: rec.undone,
          rolledForward: rec.rolledForward,
          finished: rec.finished,
          quarantined: rec.quarantined.map((q) => q.container),
        },
        'journal recovery done',
      );
    return rec.rolledForward.length + rec.finished.length;
  }

  /** Every quarantined container once; resolves with those still quarantined. */
  async all(): Promise<string[]> {
    for (const name of this.deps.book.names()) {
      if (!this.deps.locked(name)) await this.tryOne(name);
    }
    return this.deps.book.names();
  }

  /**
   * Starts the automatic tries that are due (without waiting for them) and
   * returns when the next one is, or undefined when none is planned.
   */
  tick(now: number): number | undefined {
    let next: number | undefined;
    for (const name of this.deps.book.names()) {
      if (!this.deps.book.get(name)?.stateWrite) {
        this.due.delete(name);
        continue;
      }
      let d = this.due.get(name);
      if (!d) {
        d = { at: now + STATE_WRITE_RETRY_MS, waitMs: STATE_WRITE_RETRY_MS };
        this.due.set(name, d);
      }
      if (d.at <= now && !this.trying.has(name) && !this.deps.locked(name)) {
        const waitMs = Math.min(d.waitMs * 2, STATE_WRITE_RETRY_CAP_MS);
        this.due.set(name, { at: now + waitMs, waitMs });
        void this.tryOne(name);
        d = this.due.get(name)!;
      }
      next = next === undefined ? d.at : Math.min(next, d.at);
    }
    for (const name of this.due.keys()) if (!this.deps.book.get(name)) this.due.delete(name);
    return next;
  }

  private async tryOne(name: string): Promise<void> {
    this.trying.add(name);
    const op: LockingOperation = { id: `reconcile-recover-${randomUUID().slice(0, 8)}`, kind: 'recover' };
    try {
      const r = await this.deps
        .runExclusive(name, op, () => retryQuarantined(this.deps.exec, name))
        .catch((err: unknown) => toSpcdError(err));
      if (r === 'cleared') {
        this.due.delete(name);
        await this.deps.cleared(name);
        this.deps.book.clear(name, 'journal entry resolved or removed; supervised again');
      } else if (!(r instanceof SpcdError)) this.deps.book.add(r);
      else this.deps.log.warn({ container: name, err: r.message, code: r.code }, 'quarantine retry failed');
    } finally {
      this.trying.delete(name);
    }
  }
}
