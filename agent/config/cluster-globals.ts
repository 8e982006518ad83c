/**
 * Globals from the desired ConfigMap, applied on this node: a reload with
 * them layered over the globals file (docs/reference/config-rendering.md), which re-renders the
 * config and makes the reconciler recreate exactly the containers whose
 * rendered files changed (config hash), each through the health-gated
 * transaction that rolls it back on failure (docs/explanation/upgrade-transaction.md). Resolves
 * once every such recreate committed; rejects UPGRADE_FAILED naming the ones
 * that rolled back (or did not finish by the deadline).
 */
import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import { readJsonFile, writeFileAtomic } from '../state/atomic.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { DesiredContainer } from '../planner/types.js';

export interface ClusterGlobalsDeps {
  readonly reloadWithGlobals: (globals: Record<string, unknown>) => Promise<Record<string, unknown>>;
  readonly desired: () => readonly DesiredContainer[];
  readonly events: EventBus;
  readonly clock: Clock;
  /** How long the recreates may take together. */
  readonly deadlineMs: number;
}

/** Applies the globals; resolves the names of the containers recreated for them. */
export async function applyClusterGlobals(
  deps: ClusterGlobalsDeps,
  globals: Record<string, unknown>,
): Promise<string[]> {
  const before = new Map(deps.desired().map((c) => [c.spec.name, c.configHash]));
  const outcome = new Map<string, 'committed' | 'rolled-back'>();
  // Listen before the reload: the reconciler may start a recreate at once.
  const off = deps.events.subscribe((e) => {
    if (e.type !== 'upgrade-step') return;
    if (e.step === 'commit' && e.outcome === 'done') outcome.set(e.container, 'committed');
    else if (e.step === 'rollback' && e.outcome !== 'begin') outcome.set(e.container, 'rolled-back');
  });
  try {
    await deps.reloadWithGlobals(globals);
    const changed = deps
      .desired()
      .filter((c) => before.has(c.spec.name) && before.get(c.spec.name) !== c.configHash)
      .map((c) => c.spec.name);
    await new Promise<void>((resolve, reject) => {
      let done = false;
      const cancel = deps.clock.setTimer(deps.deadlineMs, () => {
        if (done) return;
        done = true;
        offCheck();
        const pending = changed.filter((n) => outcome.get(n) !== 'committed');
        reject(
          new SpcdError('UPGRADE_FAILED', `cluster globals: ${pending.join(', ')} not recreated in time`, {
            containers: pending,
          }),
        );
      });
      const check = (): void => {
        if (done || !changed.every((n) => outcome.has(n))) return;
        done = true;
        cancel();
        offCheck();
        const failed = changed.filter((n) => outcome.get(n) === 'rolled-back');
        if (failed.length > 0)
          reject(
            new SpcdError('UPGRADE_FAILED', `cluster globals: ${failed.join(', ')} rolled back`, {
              containers: failed,
            }),
          );
        else resolve();
      };
      const offCheck = deps.events.subscribe(() => check());
      check();
    });
    return changed;
  } finally {
    off();
  }
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
