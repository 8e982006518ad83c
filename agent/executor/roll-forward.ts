import { toSpcdError, type SpcdError } from '../errors.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import { STARTED_STEPS, type JournalEntry } from '../state/journal.js';
import type { GenerationRecord } from '../state/store.js';
import { gate } from './gate.js';
import type { ExecutorDeps } from './ports.js';
import { finish } from './undo.js';

/** What a roll forward gates: the new instance and its generation's record (the spec it was created with). */
export interface Started {
  readonly fresh: ObservedContainer;
  readonly record: GenerationRecord;
}

/**
 * Whether recovery may roll an entry forward instead of undoing it: its new
 * generation was started ('starting-new' or 'gating'), runs under the
 * container's name with that generation's labels, its record (and so its own
 * gate) is kept, the old instance does not run, and nothing marked the entry
 * undo-only. Otherwise, why not (the undo's reason).
 */
export async function startedGeneration(
  deps: ExecutorDeps,
  entry: JournalEntry,
): Promise<Started | { readonly why: string }> {
  const name = entry.container;
  if (entry.mustUndo !== undefined) return { why: entry.mustUndo };
  if (!STARTED_STEPS.includes(entry.step) || !entry.newId)
    return { why: 'the new generation was not started yet' };
  const record = deps.state.generation(name, entry.toGeneration);
  if (!record) return { why: `generation ${entry.toGeneration} has no record left to gate it by` };
  const fresh = await deps.engine.inspect(entry.newId);
  if (fresh?.state !== 'running') return { why: 'the new generation does not run' };
  const id = fresh.identity;
  if (
    fresh.name !== name ||
    id.instance !== deps.instance ||
    id.container !== name ||
    id.generation !== entry.toGeneration
  )
    return { why: `the instance running is not generation ${entry.toGeneration} under ${name}` };
  const old = entry.oldId ? await deps.engine.inspect(entry.oldId) : undefined;
  if (old && isRunning(old)) return { why: 'the previous instance still runs' };
  return { fresh, record };
}

/**
 * Finishes a transaction whose new generation was found running: the entry
 * is marked undo-only and at 'gating' (a recovery interrupted in this gate
 * undoes next time, so a gate never repeats for ever), the generation's own
 * gate runs on it (gate.ts, the transaction's), and when it passes the entry
 * goes to 'committing' and is finished as the transaction's commit finishes
 * it. Resolves undefined when committed, or with the gate's failure (the
 * caller undoes); then, as after the transaction's own failed gate, the
 * target is recorded as failed so that the reconciler does not retry it
 * until the definition changes. A gate ended by spcd's own shutdown is no
 * verdict: the entry is put back as it was and the error thrown (nothing is
 * undone). `at.entry` follows what the journal holds.
 */
export async function rollForward(
  deps: ExecutorDeps,
  at: { entry: JournalEntry },
  started: Started,
): Promise<SpcdError | undefined> {
  const { entry } = at;
  const name = entry.container;
  const N = entry.toGeneration;
  const since = new Date(deps.clock.now()).toISOString();
  at.entry = { ...entry, step: 'gating', mustUndo: `a recovery's gate began at ${since} and did not end` };
  await deps.journal.write(at.entry);
  recoveryStep(deps, entry, 'health-gate', 'begin', 'rolling forward');
  try {
    await gate(deps, name, started.fresh.id, started.record.spec);
  } catch (err) {
    const e = toSpcdError(err);
    if (e.code === 'SHUTTING_DOWN') {
      // No verdict: spcd is stopping. The entry goes back as it was, for the next start's gate.
      at.entry = entry;
      await deps.journal.write(entry);
      throw e;
    }
    deps.health.unwatch(name);
    recoveryStep(deps, entry, 'health-gate', 'failed', e.message);
    const { specHash, configHash } = started.record;
    await deps.state.setFailedTarget(name, { specHash, configHash, generation: N });
    return e;
  }
  recoveryStep(deps, entry, 'health-gate', 'done');
  // `entry` carries no mark (startedGeneration refuses one that does): committing drops it.
  at.entry = { ...entry, step: 'committing' };
  await deps.journal.write(at.entry);
  await finish(deps, at.entry);
  deps.log.info({ container: name, generation: N }, 'interrupted upgrade rolled forward');
  return undefined;
}

/** An upgrade-step event of recovery, under the interrupted transaction's operation id. */
export function recoveryStep(
  deps: ExecutorDeps,
  entry: JournalEntry,
  step: string,
  outcome: 'begin' | 'done' | 'failed',
  detail?: string,
): void {
  deps.events.publish({
    type: 'upgrade-step',
    at: deps.clock.now(),
    operationId: entry.operationId,
    container: entry.container,
    step,
    generation: entry.toGeneration,
    outcome,
    ...(detail !== undefined ? { detail } : {}),
  });
}
