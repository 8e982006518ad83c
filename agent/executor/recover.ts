import { involvesCode, toSpcdError, type SpcdError } from '../errors.js';
import { UPGRADE_STEPS, type JournalEntry } from '../state/journal.js';
import type { ExecutorDeps } from './ports.js';
import { recoveryStep, rollForward, startedGeneration } from './roll-forward.js';
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

/** The road recovery took for an entry it resolved. */
export type RecoveryRoad = 'undone' | 'rolledForward' | 'finished';

export interface RecoveryReport {
  readonly undone: string[];
  /** Started and running when spcd died, then gated and committed by recovery. */
  readonly rolledForward: string[];
  readonly finished: string[];
  readonly quarantined: QuarantinedEntry[];
}

/**
 * On start, before the first reconcile, entry by entry: an entry left by a
 * crash is undone (its new generation was not started, or does not run, or
 * fails its gate now), rolled forward (its new generation runs and passes its
 * gate now: committed, nothing restarted) or, once it passed its gate,
 * finished. One that cannot be (its old instance gone, an engine call that
 * keeps failing, a malformed file) is quarantined and the others go on.
 * Afterwards the journal holds only quarantined entries.
 */
export async function recoverJournal(deps: ExecutorDeps): Promise<RecoveryReport> {
  const report: RecoveryReport = { undone: [], rolledForward: [], finished: [], quarantined: [] };
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
  const quarantined = new Set(report.quarantined.map((q) => q.container));
  for (const name of deps.state.names()) {
    if (quarantined.has(name)) continue;
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

/** Finishes, rolls forward or undoes one entry; the quarantine record when it cannot. */
export async function recoverEntry(
  deps: ExecutorDeps,
  entry: JournalEntry,
): Promise<RecoveryRoad | QuarantinedEntry> {
  const at = { entry };
  let doing = 'undoing';
  try {
    const road = await resolve(deps, at, (d) => (doing = d));
    recoveryStep(deps, entry, 'recover', 'done', ROAD_DETAIL[road]);
    return road;
  } catch (err) {
    const e = toSpcdError(err);
    const reason = `${doing} the upgrade to generation ${entry.toGeneration} (step ${entry.step}) failed: ${e.code}: ${e.message}`;
    recoveryStep(deps, entry, 'recover', 'failed', `quarantined: ${reason}`);
    return {
      container: entry.container,
      file: deps.journal.fileOf(entry.container),
      reason,
      entry: at.entry,
      ...stateWriteOf(e),
    };
  }
}

const ROAD_DETAIL: Record<RecoveryRoad, string> = {
  undone: 'undone: the previous generation runs',
  rolledForward: 'rolled forward: the new generation passed its gate and is committed',
  finished: 'finished: the new generation is committed',
};

/** The road itself; `doing` names what is under way, for a quarantine's reason. */
async function resolve(
  deps: ExecutorDeps,
  at: { entry: JournalEntry },
  doing: (what: string) => void,
): Promise<RecoveryRoad> {
  const { entry } = at;
  const ctx = { container: entry.container, step: entry.step, generation: entry.toGeneration };
  if (UPGRADE_STEPS.indexOf(entry.step) >= UPGRADE_STEPS.indexOf('committing')) {
    doing('finishing');
    deps.log.warn({ ...ctx, road: 'finish' }, 'finishing an interrupted upgrade');
    await finish(deps, entry);
    return 'finished';
  }
  const interrupted = `interrupted at step ${entry.step} by an spcd restart`;
  const started = await startedGeneration(deps, entry);
  if ('why' in started) {
    deps.log.warn({ ...ctx, road: 'undo', why: started.why }, 'undoing an interrupted upgrade');
    await undo(deps, entry, `${interrupted}; ${started.why}`);
    return 'undone';
  }
  doing('rolling forward');
  deps.log.warn(
    { ...ctx, road: 'roll-forward', containerId: started.fresh.id },
    'rolling an interrupted upgrade forward: its new generation runs; gating it',
  );
  const failed = await rollForward(deps, at, started);
  if (!failed) return 'rolledForward';
  doing('undoing');
  deps.log.warn(
    { ...ctx, road: 'undo', code: failed.code, err: failed.message },
    'the rolled-forward generation failed its gate; undoing the interrupted upgrade',
  );
  await undo(deps, at.entry, `${interrupted}; rolled forward, but its gate failed: ${failed.message}`);
  return 'undone';
}

/**
 * Tries a quarantined container again (on reload): 'cleared' when its file
 * is gone (the operator removed it) or the entry now finishes, rolls forward
 * or undoes;
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
