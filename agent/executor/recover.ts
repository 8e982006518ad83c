import { involvesCode, toSpcdError, type SpcdError } from '../errors.js';
import { UPGRADE_STEPS, type JournalEntry } from '../state/journal.js';
import type { ExecutorDeps } from './ports.js';
import { finish, undo } from './undo.js';

/**
 * A journal entry recovery could not finish or undo, or a file that is no
 * entry at all. Its file stays where it is; the container is left alone
 * (nothing created, started, replaced or removed) until an operator clears it.
 */
export interface QuarantinedEntry {
  readonly container: string;
  readonly file: string;
  readonly reason: string;
  /** The entry as read; undefined when the file is malformed. */
  readonly entry: JournalEntry | undefined;
  /**
   * Set when what failed was a write to the state directory (full, read-only,
   * an I/O error): nothing is in doubt but spcd's own files, so spcd retries
   * it by itself, with backoff, once the disk may take the write again.
   */
  readonly stateWrite?: true;
}

/** The quarantine record's stateWrite field for a failure (present only when it is one). */
export function stateWriteOf(e: SpcdError): { stateWrite?: true } {
  return involvesCode(e, 'STATE_WRITE_FAILED') ? { stateWrite: true } : {};
}

export interface RecoveryReport {
  readonly undone: string[];
  readonly finished: string[];
  readonly quarantined: QuarantinedEntry[];
}

/**
 * On start, before the first reconcile, entry by entry: an entry left by a
 * crash is undone (the new generation never proved itself) or, once it passed
 * its gate, finished. One that cannot be (its old instance gone, an engine
 * call that keeps failing, a malformed file) is quarantined and the others go
 * on. Afterwards the journal holds only quarantined entries.
 */
export async function recoverJournal(deps: ExecutorDeps): Promise<RecoveryReport> {
  const report: RecoveryReport = { undone: [], finished: [], quarantined: [] };
  const { entries, malformed } = await deps.journal.scan();
  for (const m of malformed) {
    report.quarantined.push({
      container: m.container,
      file: m.file,
      reason: `malformed journal entry: ${m.reason}`,
      entry: undefined,
    });
  }
  for (const entry of entries) {
    const r = await recoverEntry(deps, entry);
    if (typeof r === 'string') report[r].push(entry.container);
    else report.quarantined.push(r);
  }
  // A generation allocated but never journaled (crash between allocate and create) would stay
  // 'in-progress' in the history for ever otherwise; its number is burnt, never reused. A
  // quarantined container's transaction is unresolved: its record stays as it is.
  const held = new Set(report.quarantined.map((q) => q.container));
  for (const name of deps.state.names()) {
    if (held.has(name)) continue;
    for (const g of deps.state.record(name)?.generations ?? []) {
      if (g.outcome === 'in-progress')
        await deps.state.setOutcome(
          name,
          g.generation,
          'failed',
          'interrupted by an spcd restart before it was journaled or committed',
        );
    }
  }
  return report;
}

/** Finishes or undoes one entry; the quarantine record when it cannot. */
export async function recoverEntry(
  deps: ExecutorDeps,
  entry: JournalEntry,
): Promise<'undone' | 'finished' | QuarantinedEntry> {
  const past = UPGRADE_STEPS.indexOf(entry.step) >= UPGRADE_STEPS.indexOf('committing');
  deps.log.warn(
    { container: entry.container, step: entry.step, generation: entry.toGeneration },
    past ? 'finishing an interrupted upgrade' : 'undoing an interrupted upgrade',
  );
  try {
    if (past) {
      await finish(deps, entry);
      return 'finished';
    }
    await undo(deps, entry, `interrupted at step ${entry.step} by an spcd restart`);
    return 'undone';
  } catch (err) {
    const e = toSpcdError(err);
    return {
      container: entry.container,
      file: deps.journal.fileOf(entry.container),
      reason: `${past ? 'finishing' : 'undoing'} the upgrade to generation ${entry.toGeneration} (step ${entry.step}) failed: ${e.code}: ${e.message}`,
      entry,
      ...stateWriteOf(e),
    };
  }
}

/**
 * Tries a quarantined container again (on reload): 'cleared' when its file
 * is gone (the operator removed it) or the entry now finishes or undoes;
 * else the quarantine record, with the reason as it stands now.
 */
export async function retryQuarantined(
  deps: ExecutorDeps,
  container: string,
): Promise<'cleared' | QuarantinedEntry> {
  const file = deps.journal.fileOf(container);
  let entry: JournalEntry | undefined;
  try {
    entry = await deps.journal.read(container);
  } catch (err) {
    return {
      container,
      file,
      reason: `malformed journal entry: ${toSpcdError(err).message}`,
      entry: undefined,
    };
  }
  if (!entry) return 'cleared';
  const r = await recoverEntry(deps, entry);
  return typeof r === 'string' ? 'cleared' : r;
}
