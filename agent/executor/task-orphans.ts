import { SpcdError, isSpcdError } from '../errors.js';
import type { ContainerEngine } from '../engine/types.js';
import type { ExecutorDeps } from './ports.js';

/** What removing orphaned task containers needs. */
export type TaskOrphanDeps = Pick<ExecutorDeps, 'instance' | 'log'> & {
  readonly engine: Pick<ContainerEngine, 'listTasks' | 'kill' | 'remove'>;
};

/**
 * Removes bootstrap task containers of this instance that no running task
 * owns: left by an spcd that died during a task (or whose removal failed).
 * Tasks run only while their container is locked, so when spcd starts, or
 * before it runs a container's tasks, any such container is an orphan. A
 * still-running orphan is killed, not waited for (docs/reference/config-rendering.md, bootstrap
 * tasks): the retry runs the task again, and never beside the old one.
 * Throws when an orphan survives, so no task starts beside it.
 */
export async function removeTaskOrphans(deps: TaskOrphanDeps, container?: string): Promise<string[]> {
  const mine = async (): Promise<Awaited<ReturnType<typeof deps.engine.listTasks>>> =>
    (await deps.engine.listTasks(deps.instance)).filter(
      (t) => container === undefined || t.identity.container === container,
    );
  const orphans = await mine();
  for (const t of orphans) {
    deps.log.warn(
      {
        container: t.identity.container,
        task: t.task,
        generation: t.identity.generation,
        id: t.id.slice(0, 12),
        running: t.running,
      },
      'removing a bootstrap task container left by an earlier spcd',
    );
    await deps.engine.kill(t.id, 'SIGKILL').catch((err: unknown) => {
      if (!isSpcdError(err, 'ENGINE_NOT_FOUND')) throw err;
    });
    await deps.engine.remove(t.id);
  }
  if (orphans.length > 0) {
    const left = await mine();
    if (left.length > 0) {
      throw new SpcdError(
        'CONFLICT',
        `bootstrap task container ${left[0]!.name} of ${left[0]!.identity.container} is still being removed`,
        { container: left[0]!.identity.container, task: left[0]!.task },
      );
    }
  }
  return orphans.map((t) => t.name);
}
