import { toSpcdError } from '../errors.js';
import { upgradeOutcomeOf, type UpgradeOutcome } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { JournalEntry } from '../state/journal.js';
import type { ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from './ports.js';
import type { PullPolicy } from './image.js';
import { prepare } from './upgrade-prepare.js';
import { commit, countBefore, createNew, passGate, swap } from './upgrade-swap.js';
import { rollBack } from './upgrade-rollback.js';
import { openTxn, TxnJournal, type Window } from './upgrade-txn.js';

export interface UpgradeRequest {
  readonly operationId: string;
  readonly kind: 'upgrade' | 'recreate' | 'rollback';
  /** The spec the new generation runs. */
  readonly spec: ContainerSpec;
  readonly specHash: string;
  /** The instance it replaces; undefined when there is none. */
  readonly current: ObservedContainer | undefined;
  readonly pull: PullPolicy;
  readonly expectDigest?: string;
  /** For a rollback: the generation whose spec this re-applies. */
  readonly from?: number;
  readonly force?: boolean;
  readonly reason: string;
  readonly signal?: AbortSignal;
  /** An operator's change: what its commit does to the pin (JournalEntry.pin). */
  readonly pin?: JournalEntry['pin'];
}

export interface UpgradeWindow {
  /** From the stop call on the old container to the new one running. */
  readonly stopToRunningMs: number;
  /** From the stop call to the new generation passing its health gate. */
  readonly stopToHealthyMs: number;
}

export interface UpgradeResult {
  readonly container: string;
  readonly generation: number;
  readonly previousGeneration: number | null;
  readonly image: string;
  readonly imageDigest: string | null;
  readonly containerId: string;
  readonly pullMs: number;
  readonly window: UpgradeWindow | null;
  readonly warnings: readonly string[];
}

/**
 * The upgrade transaction for one container: pull (outside the window),
 * allocate generation N+1, create it stopped under a staging name, swap the
 * names, stop the old, start the new, pass the health gate, commit. Any
 * failure after the old one was touched rolls back to it; no registry is
 * needed for that because the old container and image are kept until commit.
 * Each step is journaled before it begins, so a crash is finished or undone
 * on restart (recover.ts).
 */
export async function upgradeContainer(deps: ExecutorDeps, req: UpgradeRequest): Promise<UpgradeResult> {
  // Its end goes out on the bus once, whatever the exit: the upgrades metric counts these.
  const ended = (outcome: UpgradeOutcome, code?: string): void =>
    deps.events.publish({
      type: 'upgrade',
      at: deps.clock.now(),
      operationId: req.operationId,
      container: req.spec.name,
      kind: req.kind,
      outcome,
      ...(code !== undefined ? { code } : {}),
    });
  try {
    const result = await transaction(deps, req);
    ended('succeeded');
    return result;
  } catch (err) {
    const code = toSpcdError(err).code;
    ended(upgradeOutcomeOf(code), code);
    throw err;
  }
}

/**
 * The phases follow the journal's steps: prepare (nothing journaled),
 * create, swap (renaming, stopping-old, starting-new), gate, commit. A
 * failure in swap or gate takes the one undo path (upgrade-rollback.ts).
 */
async function transaction(deps: ExecutorDeps, req: UpgradeRequest): Promise<UpgradeResult> {
  const tx = openTxn(deps, req);
  const p = await prepare(tx);
  const N = p.generation;
  const journal = new TxnJournal(deps, p.entryBase);
  const newId = await createNew(tx, p, journal);
  const census = await countBefore(tx);
  deps.health.pause(tx.name);
  const w: Window = { stopAt: 0, runningAt: 0 };
  try {
    await swap(tx, N, newId, journal, w);
    await passGate(tx, N, newId, journal);
  } catch (err) {
    await rollBack(tx, p, journal, w, err);
  } finally {
    deps.health.resume(tx.name);
  }
  const healthyAt = deps.clock.now();
  await commit(tx, N, newId, journal, census);
  return {
    container: tx.name,
    generation: N,
    previousGeneration: tx.oldGen,
    image: req.spec.image,
    imageDigest: p.image.digest,
    containerId: newId,
    pullMs: p.pullMs,
    window: tx.old
      ? { stopToRunningMs: w.runningAt - w.stopAt, stopToHealthyMs: healthyAt - w.stopAt }
      : null,
    warnings: p.warnings,
  };
}
