import { toSpcdError } from '../errors.js';
import { isRunning } from '../model/observed.js';
import { pickPrimary } from '../planner/plan.js';
import type { DesiredContainer } from '../planner/types.js';
import type { RebuiltContainer } from '../state/store.js';
import type { ExecutorDeps } from './ports.js';
import { removeTaskOrphans } from './task-orphans.js';

/**
 * What spcd does once the engine answers, before journal recovery and the
 * first pass. Neither part may stop spcd from supervising: a failure is
 * logged (and shown in status) and the node is still looked after.
 * 1. When state.json was unusable and set aside, rebuild from the labels of
 *    this instance's containers (first: orphaned tasks still carry numbers).
 * 2. Remove bootstrap task containers a dead spcd left behind.
 */
export async function prepareStart(deps: ExecutorDeps, desired: readonly DesiredContainer[]): Promise<void> {
  if (deps.state.needsRebuild()) {
    try {
      const found = await rebuildState(deps, desired);
      deps.log.warn(
        {
          containers: found.map(
            (f) => `${f.name}: next ${f.maxGeneration + 1}, running ${f.runningGeneration ?? '-'}`,
          ),
        },
        'state rebuilt from container labels',
      );
    } catch (err) {
      deps.log.error({ err: toSpcdError(err).message }, 'cannot rebuild the state from container labels');
    }
  }
  try {
    await removeTaskOrphans(deps);
  } catch (err) {
    // Retried before each container's tasks run, which then refuse to start beside one.
    deps.log.warn({ err: toSpcdError(err).message }, 'cannot remove orphaned bootstrap task containers');
  }
}

/** Generation numbers and last known good from what the engine holds; persisted in one write. */
async function rebuildState(
  deps: ExecutorDeps,
  desired: readonly DesiredContainer[],
): Promise<RebuiltContainer[]> {
  const observed = await deps.engine.listManaged(deps.instance);
  const tasks = await deps.engine.listTasks(deps.instance);
  const max = new Map<string, number>();
  const see = (name: string, generation: number | null): void => {
    if (generation !== null) max.set(name, Math.max(max.get(name) ?? 0, generation));
  };
  for (const o of observed) see(o.identity.container, o.identity.generation);
  for (const t of tasks) see(t.identity.container, t.identity.generation);
  const journal = await deps.journal.scan().catch(() => ({ entries: [] }));
  for (const e of journal.entries) {
    see(e.container, e.toGeneration);
    see(e.container, e.fromGeneration);
  }
  const now = new Date(deps.clock.now());
  const found = [...max].map(([name, maxGeneration]): RebuiltContainer => {
    const p = pickPrimary(
      name,
      observed.filter((o) => o.identity.container === name),
    );
    if (!p || !isRunning(p)) return { name, maxGeneration };
    const d = desired.find((x) => x.spec.name === name && x.specHash === p.identity.specHash);
    return {
      name,
      maxGeneration,
      runningGeneration: p.identity.generation,
      ...(d
        ? {
            running: {
              generation: p.identity.generation,
              image: p.image,
              imageDigest: null,
              specHash: p.identity.specHash,
              configHash: p.identity.configHash,
              createdAt: p.startedAt || now.toISOString(),
              spec: d.spec,
            },
          }
        : {}),
    };
  });
  await deps.state.rebuild(found, now);
  return found;
}
