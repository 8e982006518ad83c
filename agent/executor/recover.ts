import { UPGRADE_STEPS } from '../state/journal.js';
import type { ExecutorDeps } from './ports.js';
import { finish, undo } from './upgrade.js';

/**
 * On start, before the first reconcile: every journal entry left by a crash
 * is undone (the new generation never proved itself) or, once it passed its
 * gate, finished. Afterwards the journal is empty and exactly one instance of
 * each container is named and running.
 */
export async function recoverJournal(deps: ExecutorDeps): Promise<{ undone: string[]; finished: string[] }> {
  const undone: string[] = [];
  const finished: string[] = [];
  for (const entry of await deps.journal.all()) {
    const past = UPGRADE_STEPS.indexOf(entry.step) >= UPGRADE_STEPS.indexOf('committing');
    deps.log.warn(
      { container: entry.container, step: entry.step, generation: entry.toGeneration },
      past ? 'finishing an interrupted upgrade' : 'undoing an interrupted upgrade',
    );
    if (past) {
      await finish(deps, entry);
      finished.push(entry.container);
    } else {
      await undo(deps, entry, `interrupted at step ${entry.step} by an spcd restart`);
      undone.push(entry.container);
    }
  }
  // A generation allocated but never journaled (crash between allocate and create) would stay
  // 'in-progress' in the history for ever otherwise; its number is burnt, never reused.
  for (const name of deps.state.names()) {
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
  return { undone, finished };
}
