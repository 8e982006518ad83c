import { randomUUID } from 'node:crypto';
import { toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { CausedOperation, RetriesEnded } from '../model/operation.js';
import { recoverJournal, type QuarantinedEntry } from '../executor/recover.js';
import type { ExecutorDeps } from '../executor/ports.js';
import type { RecoverOrigin } from '../planner/types.js';
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
  /** A retry was asked for: a pass plans it. */
  readonly trigger: () => void;
  /**
   * The container leaves quarantine (the launcher had its ledger forget the
   * error): the desired containers are taken again (a change the retry
   * committed may have moved a pin) before it is planned again.
   */
  readonly cleared: (name: string) => Promise<void>;
}

/** Told how a retry ended: the operation that ran it, or undefined when none did (it left quarantine first, or spcd stops). */
type Waiter = (ran: CausedOperation | undefined) => void;

/** A retry asked for, by whom, and who waits for its outcome. */
interface Asked {
  readonly origin: RecoverOrigin;
  readonly waiters: Waiter[];
}

/**
 * Asks for quarantined containers to be tried again: a pass plans each as a
 * `recover` step (planner/plan.ts) and the launcher runs it under the
 * container's lock. On reload (the operator's word): all of them. By itself:
 * only one quarantined by a failed write to the state directory (a full
 * disk), first after STATE_WRITE_RETRY_MS, then twice as long after each try
 * that fails again, up to the cap. Start-up recovery, before the first pass,
 * is the one that runs outside a step (docs/architecture.md).
 */
export class QuarantineRetry {
  /** The next automatic try of each state-write quarantine, and the wait that led to it. */
  private readonly due = new Map<string, { at: number; waitMs: number }>();
  private readonly asked = new Map<string, Asked>();

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

  /**
   * The operator's reload: every quarantined container that is not locked,
   * tried again by the next pass. Resolves, once each try ended, with those
   * still quarantined and the operation that ran each try (a try asked for
   * earlier by spcd itself runs under the id the launcher gave it).
   */
  async all(): Promise<RetriesEnded> {
    const tries: Promise<CausedOperation | undefined>[] = [];
    for (const name of this.deps.book.names()) {
      if (this.deps.locked(name)) continue;
      const operation = { id: `reload-recover-${randomUUID().slice(0, 8)}`, kind: 'recover' as const };
      tries.push(this.ask(name, { by: 'operator', operation }));
    }
    this.deps.trigger();
    const operations = (await Promise.all(tries)).filter((o): o is CausedOperation => o !== undefined);
    return { quarantined: this.deps.book.names(), operations };
  }

  /** No try (spcd is not running): those quarantined, and no operation. */
  none(): RetriesEnded {
    return { quarantined: this.deps.book.names(), operations: [] };
  }

  /**
   * The plan's input: the retries asked for. One whose container left
   * quarantine meanwhile is dropped (its waiters told).
   */
  requested(): ReadonlyMap<string, RecoverOrigin> {
    for (const name of [...this.asked.keys()]) if (!this.deps.book.get(name)) this.settle(name);
    return new Map([...this.asked].map(([name, a]) => [name, a.origin]));
  }

  /** The launcher started the retry of `name` under `operationId`: its waiters are told when `running` settles. */
  started(name: string, running: Promise<unknown>, operationId: string): void {
    const a = this.asked.get(name);
    if (!a) return;
    this.asked.delete(name);
    const tell = (outcome: CausedOperation['outcome']): void => {
      const ran: CausedOperation = { operationId, kind: 'recover', container: name, outcome };
      a.waiters.forEach((w) => w(ran));
    };
    running.then(
      () => tell(this.deps.book.get(name) ? 'quarantined' : 'cleared'),
      (err: unknown) => tell(toSpcdError(err).code === 'SHUTTING_DOWN' ? 'cancelled' : 'failed'),
    );
  }

  /** A retry's outcome (the `recover` step's): out of quarantine, or its record as it stands now. */
  async recovered(name: string, outcome: 'cleared' | QuarantinedEntry): Promise<void> {
    if (outcome !== 'cleared') {
      this.deps.book.add(outcome);
      return;
    }
    this.due.delete(name);
    await this.deps.cleared(name);
    this.deps.book.clear(name, 'journal entry resolved or removed; supervised again');
  }

  /** Shutting down: nobody waits for a retry any longer. */
  dropAll(): void {
    for (const name of [...this.asked.keys()]) this.settle(name);
  }

  /**
   * Asks for the automatic tries that are due and returns when the next one
   * is (now, when one was just asked: the next pass plans it), or undefined
   * when none is planned.
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
      let at = d.at;
      if (d.at <= now && !this.asked.has(name) && !this.deps.locked(name)) {
        const waitMs = Math.min(d.waitMs * 2, STATE_WRITE_RETRY_CAP_MS);
        this.due.set(name, { at: now + waitMs, waitMs });
        void this.ask(name, { by: 'plan' });
        at = now;
      }
      next = next === undefined ? at : Math.min(next, at);
    }
    for (const name of this.due.keys()) if (!this.deps.book.get(name)) this.due.delete(name);
    return next;
  }

  /** Asks for a retry of `name` (an earlier request keeps its origin); resolves when it ended, with how. */
  private ask(name: string, origin: RecoverOrigin): Promise<CausedOperation | undefined> {
    return new Promise((resolve) => {
      const a = this.asked.get(name);
      if (a) a.waiters.push(resolve);
      else this.asked.set(name, { origin, waiters: [resolve] });
    });
  }

  private settle(name: string): void {
    const a = this.asked.get(name);
    this.asked.delete(name);
    a?.waiters.forEach((w) => w(undefined));
  }
}
