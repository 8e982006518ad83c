import { SpcdError } from '../errors.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { JournalEntry } from '../state/journal.js';
import type { ExecutorDeps } from './ports.js';

/** The definitions' default stop grace, for a generation whose record was trimmed away. */
const DEFAULT_STOP_GRACE_MS = 10_000;

/** The stop grace the generation's own spec asks for. */
export function stopGraceOf(
  deps: ExecutorDeps,
  name: string,
  generation: number,
  fallbackMs = DEFAULT_STOP_GRACE_MS,
): number {
  return deps.state.generation(name, generation)?.spec.stopGraceMs ?? fallbackMs;
}

/** The instances of the entry's new generation: by id when it was journaled, else by label. */
async function newInstances(deps: ExecutorDeps, entry: JournalEntry): Promise<ObservedContainer[]> {
  if (entry.newId) {
    const fresh = await deps.engine.inspect(entry.newId);
    return fresh ? [fresh] : [];
  }
  // Crashed inside create: the new container may exist under its staging (or final) name.
  return (await deps.engine.listManaged(deps.instance)).filter(
    (c) => c.identity.container === entry.container && c.identity.generation === entry.toGeneration,
  );
}

/**
 * Puts the old generation back: the new one is stopped (with its own stop
 * grace) and removed, the config dir points at the old generation's config
 * again, the old one is named and running. The old instance is checked
 * first: when it is gone, the new one is never removed (it is the only
 * instance left); it is named and started instead, and ROLLBACK_FAILED says
 * so (the journal entry stays for the operator, see recover.ts). A stop that
 * passes its deadline throws before anything is removed, so the entry stays
 * and a later recovery finishes the undo.
 */
export async function undo(deps: ExecutorDeps, entry: JournalEntry, reason: string): Promise<void> {
  const { engine, state, journal } = deps;
  const name = entry.container;
  const old = entry.oldId ? await engine.inspect(entry.oldId) : undefined;
  const fresh = await newInstances(deps, entry);
  if (entry.oldId && !old) {
    const kept = fresh[0];
    if (kept) {
      if (kept.name !== name) await engine.rename(kept.id, name);
      if (!isRunning(kept)) await engine.start(kept.id);
    }
    throw new SpcdError(
      'ROLLBACK_FAILED',
      `the previous instance of ${name} (${entry.oldId.slice(0, 12)}) is gone; ${
        kept
          ? `kept generation ${entry.toGeneration} (${kept.id.slice(0, 12)}) running under ${name} instead of removing it`
          : 'the new generation is gone too'
      }`,
      { container: name, generation: entry.toGeneration, kept: kept?.id ?? null },
    );
  }
  for (const c of fresh) {
    if (isRunning(c)) await engine.stop(c.id, stopGraceOf(deps, name, entry.toGeneration));
    await engine.remove(c.id);
  }
  if (old) {
    // Before the old one starts: docker resolves the config mount at each start.
    const restored = await deps.preparer.restore(name, old.identity.configHash);
    if (!restored)
      deps.log.warn(
        { container: name, configHash: old.identity.configHash },
        'the config version of the previous generation is no longer kept; it runs the current one',
      );
    if (old.name !== name) await engine.rename(old.id, name);
    if (!isRunning(old) || old.state === 'paused') await engine.start(old.id);
  }
  await state.setOutcome(name, entry.toGeneration, 'rolled-back', reason);
  await journal.clear(name);
}

/** An operator's change committed: its spec pinned over the definitions, or an earlier pin dropped. */
async function commitPin(deps: ExecutorDeps, entry: JournalEntry): Promise<void> {
  if (entry.pin === undefined) return;
  if (entry.pin === 'clear') return deps.state.setPin(entry.container, undefined);
  const spec = deps.state.generation(entry.container, entry.toGeneration)?.spec;
  if (spec) await deps.state.setPin(entry.container, { spec, definitionHash: entry.pin.definitionHash });
}

/**
 * Completes a transaction whose new generation passed its gate. The old
 * instance is removed only when the new one exists: never the last one.
 */
export async function finish(deps: ExecutorDeps, entry: JournalEntry): Promise<void> {
  const { engine, state, journal } = deps;
  const fresh = entry.newId ? await engine.inspect(entry.newId) : undefined;
  if (!fresh) {
    throw new SpcdError(
      'ROLLBACK_FAILED',
      `generation ${entry.toGeneration} of ${entry.container} passed its gate but its instance is gone; the previous instance is kept`,
      { container: entry.container, generation: entry.toGeneration },
    );
  }
  await state.commit(entry.container, entry.toGeneration);
  await commitPin(deps, entry);
  if (entry.oldId) await engine.remove(entry.oldId);
  if (fresh.name !== entry.container) await engine.rename(fresh.id, entry.container);
  await journal.clear(entry.container);
}
