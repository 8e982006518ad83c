/**
 * Globals from the desired ConfigMap, applied on this node: a reload with
 * them layered over the globals file (docs/reference/config-rendering.md), which re-renders the
 * config and makes the reconciler recreate exactly the containers whose
 * rendered files changed (config hash), each through the health-gated
 * transaction that rolls it back on failure (docs/explanation/upgrade-transaction.md). Each
 * recreate is a pass's operation, waited for with the owner's `done(id)`
 * (decision 0058). Resolves once every such recreate committed; rejects
 * UPGRADE_FAILED naming the ones that failed and rolled back (or did not
 * finish by the deadline).
 */
import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import { readJsonFile, writeFileAtomic } from '../state/atomic.js';
import type { Clock } from '../model/clock.js';
import type { OperationBegun, OperationOutcome } from '../model/operation.js';
import type { DesiredContainer } from '../planner/types.js';

/** The owner of operations (reconciler/operations.ts), as far as the globals wait on it. */
export interface OperationsPort {
  /** Tells `fn` of each operation as it begins; returns the call that stops telling. */
  onBegin(fn: (op: OperationBegun) => void): () => void;
  /** The operation's outcome (succeeded, failed, cancelled). */
  done(id: string): Promise<OperationOutcome>;
}

export interface ClusterGlobalsDeps {
  readonly reloadWithGlobals: (globals: Record<string, unknown>) => Promise<Record<string, unknown>>;
  readonly desired: () => readonly DesiredContainer[];
  readonly operations: OperationsPort;
  readonly clock: Clock;
  /** How long the recreates may take together. */
  readonly deadlineMs: number;
}

type Recreated = 'committed' | 'rolled-back';

/**
 * The recreates (a pass's `replace` steps) that begin from now on, per
 * container, each waited for with `done`. One that never ran (CONFLICT: the
 * container was locked; cancelled: spcd stops) is not an outcome: the next
 * recreate of that container is.
 */
class Recreates {
  private readonly begun = new Map<string, Promise<OperationOutcome>[]>();
  private readonly waiting = new Map<string, () => void>();
  readonly close: () => void;

  constructor(operations: OperationsPort) {
    this.close = operations.onBegin((op) => {
      if (op.step !== 'replace') return;
      const queued = this.begun.get(op.target) ?? [];
      this.begun.set(op.target, [...queued, operations.done(op.operationId)]);
      this.waiting.get(op.target)?.();
    });
  }

  async outcome(name: string): Promise<Recreated> {
    for (;;) {
      const o = await this.next(name);
      if (o.phase === 'succeeded') return 'committed';
      if (o.phase === 'failed' && o.error.code !== 'CONFLICT') return 'rolled-back';
    }
  }

  private async next(name: string): Promise<OperationOutcome> {
    if ((this.begun.get(name) ?? []).length === 0)
      await new Promise<void>((resolve) => this.waiting.set(name, resolve));
    this.waiting.delete(name);
    return this.begun.get(name)!.shift()!;
  }
}

/** Applies the globals; resolves the names of the containers recreated for them. */
export async function applyClusterGlobals(
  deps: ClusterGlobalsDeps,
  globals: Record<string, unknown>,
): Promise<string[]> {
  const before = new Map(deps.desired().map((c) => [c.spec.name, c.configHash]));
  // Listen before the reload: the reconciler may start a recreate at once.
  const recreates = new Recreates(deps.operations);
  try {
    await deps.reloadWithGlobals(globals);
    const changed = deps
      .desired()
      .filter((c) => before.has(c.spec.name) && before.get(c.spec.name) !== c.configHash)
      .map((c) => c.spec.name);
    const outcome = new Map<string, Recreated>();
    const all = Promise.all(changed.map(async (n) => outcome.set(n, await recreates.outcome(n))));
    const inTime = await withinDeadline(deps.clock, deps.deadlineMs, all);
    if (!inTime) {
      const pending = changed.filter((n) => outcome.get(n) !== 'committed');
      throw new SpcdError('UPGRADE_FAILED', `cluster globals: ${pending.join(', ')} not recreated in time`, {
        containers: pending,
      });
    }
    const failed = changed.filter((n) => outcome.get(n) === 'rolled-back');
    if (failed.length > 0)
      throw new SpcdError('UPGRADE_FAILED', `cluster globals: ${failed.join(', ')} rolled back`, {
        containers: failed,
      });
    return changed;
  } finally {
    recreates.close();
  }
}

/** Whether `work` settled before `ms` passed on the clock. */
function withinDeadline(clock: Clock, ms: number, work: Promise<unknown>): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const cancel = clock.setTimer(ms, () => resolve(false));
    work.then(
      () => {
        cancel();
        resolve(true);
      },
      (err: unknown) => {
        cancel();
        reject(err);
      },
    );
  });
}

/** Where the cluster globals last applied are kept, so a restart renders with them (no flap back). */
export const CLUSTER_GLOBALS_FILE = 'cluster-globals.json';

/** The cluster globals last applied; {} when none. Throws STATE_CORRUPT on an unreadable file. */
export async function readClusterGlobals(stateDir: string): Promise<Record<string, unknown>> {
  const path = join(stateDir, CLUSTER_GLOBALS_FILE);
  const v = await readJsonFile(path);
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new SpcdError('STATE_CORRUPT', `${path}: not a JSON object`, { path });
  return v as Record<string, unknown>;
}

export function writeClusterGlobals(stateDir: string, globals: Record<string, unknown>): Promise<void> {
  return writeFileAtomic(join(stateDir, CLUSTER_GLOBALS_FILE), JSON.stringify(globals));
}
