import { toSpcdError } from '../errors.js';
import type { Journal } from '../state/journal.js';
import type { ContainerLocks, LockingOperation } from './locks.js';
import type { QuarantineBook } from './quarantine.js';

export interface ExclusiveDeps {
  readonly locks: ContainerLocks;
  readonly quarantine: QuarantineBook;
  readonly journal: Pick<Journal, 'fileOf' | 'read'>;
  /** Throws CONFLICT when the container is locked or has an intent, SHUTTING_DOWN while spcd stops. */
  readonly assertFree: (name: string) => void;
  /** The container is free again: a pass may have waited for it. */
  readonly released: () => void;
}

/**
 * Every task that locks a container: a step, a quarantine retry, an
 * operator's release, each the launcher's (which notes a failure in the
 * ledger). Each takes the container's lock, gives it back however it ends,
 * and quarantines the container when a failure left its journal entry. Only
 * the Reconciler has one, and hands its `run` to the launcher alone, so
 * nothing outside reconciler/ runs code under a container's lock.
 */
export class ExclusiveRunner {
  private readonly tasks = new Set<Promise<void>>();

  constructor(private readonly d: ExclusiveDeps) {}

  /** Runs fn with the container locked: no pass or other operation touches it meanwhile; CONFLICT when locked. */
  run<T>(name: string, op: LockingOperation, fn: () => Promise<T>): Promise<T> {
    try {
      this.d.assertFree(name);
    } catch (err) {
      return Promise.reject(err);
    }
    this.d.locks.acquire(name, op);
    const run = this.underLock(name, fn);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.tasks.add(settled);
    void settled.then(() => this.tasks.delete(settled));
    return run;
  }

  /** Tasks running now. */
  count(): number {
    return this.tasks.size;
  }

  /** Resolves once every task running now has ended, however it ended. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.tasks]);
  }

  private async underLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      await this.d.quarantine.afterFailure(name, toSpcdError(err), this.d.journal);
      throw err;
    } finally {
      this.d.locks.release(name);
      this.d.released();
    }
  }
}
