import { SpcdError, toSpcdError } from '../errors.js';
import { STARTED_STEPS } from '../state/journal.js';
import { rewatchOld } from './gate.js';
import { undo } from './undo.js';
import type { Prepared, Txn, TxnJournal, Window } from './upgrade-txn.js';

/**
 * The one undo path once the old instance may have been touched (swap or
 * gate failed): undo what the journal says was begun, record the failed
 * target, watch the old one again. Always throws: UPGRADE_FAILED or
 * HEALTH_GATE_FAILED when rolled back, ROLLBACK_FAILED when the undo failed too.
 */
export async function rollBack(
  tx: Txn,
  p: Prepared,
  journal: TxnJournal,
  w: Window,
  err: unknown,
): Promise<never> {
  const { deps, req, name, old, oldGen } = tx;
  const N = p.generation;
  const e = toSpcdError(err);
  // Nothing is undone while the engine still stops the old instance.
  await w.oldStopped?.engineStop.catch(() => undefined);
  tx.step('rollback', N, 'begin', e.message);
  deps.log.warn(
    { container: name, generation: N, err: e.message, code: e.code },
    'upgrade failed; rolling back',
  );
  // A crash from here on must not let recovery roll the rejected generation forward. A
  // failed write does not hold the rollback up: then a recovery's own gate decides.
  if (STARTED_STEPS.includes(journal.entry.step))
    await journal
      .mustUndo(`rolled back: ${e.message}`)
      .catch((wErr: unknown) =>
        deps.log.warn(
          { container: name, generation: N, err: toSpcdError(wErr).message },
          'could not mark the journal entry undo-only; rolling back anyway',
        ),
      );
  try {
    await undo(deps, journal.entry, `rolled back: ${e.message}`);
  } catch (rbErr) {
    const rb = toSpcdError(rbErr);
    tx.step('rollback', N, 'failed', rb.message);
    throw new SpcdError(
      'ROLLBACK_FAILED',
      `upgrade of ${name} failed (${e.message}) and so did its rollback (${rb.message})`,
      {
        container: name,
        generation: N,
        cause: e.toJSON(),
        rollback: rb.toJSON(),
      },
    );
  }
  tx.step('rollback', N, 'done');
  // The target failed on its own merits: the reconciler does not retry it until the definition changes.
  await deps.state.setFailedTarget(name, {
    specHash: req.specHash,
    configHash: p.extras.configHash,
    generation: N,
  });
  if (old) await rewatchOld(deps, name, old, req.spec).catch(() => deps.health.unwatch(name));
  throw new SpcdError(
    e.code === 'HEALTH_GATE_FAILED' ? 'HEALTH_GATE_FAILED' : 'UPGRADE_FAILED',
    `upgrade of ${name} to generation ${N} failed and was rolled back to ${oldGen ?? 'nothing'}: ${e.message}`,
    { container: name, generation: N, rolledBackTo: oldGen, cause: e.toJSON() },
  );
}
