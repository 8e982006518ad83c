import { toSpcdError } from '../errors.js';
import { isRunning } from '../model/observed.js';
import { censusAfter, censusBefore, type CensusBefore } from './census.js';
import { gate } from './gate.js';
import { settleAll, stopOld } from './stop-old.js';
import { finish, stopGraceOf } from './undo.js';
import { abandon } from './upgrade-prepare.js';
import {
  parkedName,
  stagingName,
  type Prepared,
  type Txn,
  type TxnJournal,
  type Window,
} from './upgrade-txn.js';

/** Journal step 'creating': the new generation, stopped, under a staging name. A failure abandons N. */
export async function createNew(tx: Txn, p: Prepared, journal: TxnJournal): Promise<string> {
  const { deps, req, name, old } = tx;
  const N = p.generation;
  await journal.begin('creating', null);
  tx.step('create', N, 'begin');
  let newId: string;
  try {
    newId = await deps.engine.create({
      spec: req.spec,
      identity: p.identity,
      name: old ? stagingName(name, N) : name,
      extraBinds: p.extras.extraBinds,
      extraEnv: p.extras.extraEnv,
    });
  } catch (err) {
    await abandon(tx, N, err);
    // No retry mends a definition the engine cannot run: the old instance runs on, supervised, until it changes.
    if (old && toSpcdError(err).code === 'ENGINE_UNSUPPORTED')
      await deps.state.setFailedTarget(name, {
        specHash: req.specHash,
        configHash: p.extras.configHash,
        generation: N,
      });
    await deps.journal.clear(name);
    tx.step('create', N, 'failed', toSpcdError(err).message);
    throw err;
  }
  tx.step('create', N, 'done', newId.slice(0, 12));
  deps.failpoint('upgrade.after-create');
  return newId;
}

/** The domain census: what the running hypervisor lists, before anything is stopped (census.ts). */
export async function countBefore(tx: Txn): Promise<CensusBefore | undefined> {
  const { deps, req, name, old } = tx;
  const oldCensus = old && deps.state.generation(name, old.identity.generation)?.spec.census;
  return old && isRunning(old) ? await censusBefore(deps, oldCensus || req.spec.census, old.id) : undefined;
}

/**
 * Journal steps 'renaming', 'stopping-old', 'starting-new': the names swap
 * while the old one still runs, so the window is only stop + start.
 */
export async function swap(tx: Txn, N: number, newId: string, journal: TxnJournal, w: Window): Promise<void> {
  const { deps, req, name, old } = tx;
  const { engine, clock, failpoint } = deps;
  if (old) {
    await journal.begin('renaming', newId);
    await engine.rename(old.id, parkedName(name, old.identity.generation));
    await engine.rename(newId, name);
    failpoint('upgrade.after-rename');

    await journal.begin('stopping-old', newId);
    tx.step('stop-old', N, 'begin', old.id.slice(0, 12));
    w.stopAt = clock.now();
    const oldSpec = deps.state.generation(name, old.identity.generation)?.spec;
    w.oldStopped = await stopOld(
      deps,
      old,
      stopGraceOf(deps, name, old.identity.generation, req.spec.stopGraceMs),
      oldSpec?.network === 'host',
    );
    tx.step('stop-old', N, 'done', w.oldStopped.early ? 'no process left' : undefined);
    failpoint('upgrade.after-stop-old');
  }

  // Inside the window: the journal's step and the start go together (recovery undoes
  // 'stopping-old' and 'starting-new' alike), both settled before anything goes on.
  tx.step('start-new', N, 'begin');
  if (!w.stopAt) w.stopAt = clock.now();
  await settleAll([journal.begin('starting-new', newId), engine.start(newId)]);
  w.runningAt = clock.now();
  tx.step('start-new', N, 'done');
  failpoint('upgrade.after-start-new');
  // A successor started early still needs the engine to finish the old one's stop.
  await w.oldStopped?.engineStop;
}

/** Journal step 'gating': health checks resume and the new generation must pass its gate. */
export async function passGate(tx: Txn, N: number, newId: string, journal: TxnJournal): Promise<void> {
  const { deps, req, name } = tx;
  await journal.begin('gating', newId);
  tx.step('health-gate', N, 'begin');
  deps.health.resume(name);
  await gate(deps, name, newId, req.spec, req.signal);
  tx.step('health-gate', N, 'done');
  deps.failpoint('upgrade.after-gate');
}

/** Journal step 'committing': N is last known good; only now does the old instance go. */
export async function commit(
  tx: Txn,
  N: number,
  newId: string,
  journal: TxnJournal,
  census: CensusBefore | undefined,
): Promise<void> {
  const { deps, req, name } = tx;
  await journal.begin('committing', newId);
  await finish(deps, journal.entry);
  deps.failpoint('upgrade.after-commit');
  tx.step('commit', N, 'done');
  const ctx = { operationId: req.operationId, container: name, action: req.kind, containerId: newId };
  await censusAfter(deps, census, req.spec.census, ctx);
}
