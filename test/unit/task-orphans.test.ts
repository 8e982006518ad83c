import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import type { TaskContainer } from '../../agent/engine/types.js';
import { removeTaskOrphans, type TaskOrphanDeps } from '../../agent/executor/task-orphans.js';
import { silentLogger } from '../../agent/log.js';

/** The engine boundary removeTaskOrphans uses: a task list, kill and remove, with a call log. */
class FakeTaskEngine {
  readonly calls: string[] = [];
  /** Ids whose removal the engine reports done while the container stays (a removal in progress). */
  readonly sticky = new Set<string>();
  tasks: TaskContainer[];

  constructor(tasks: TaskContainer[]) {
    this.tasks = tasks;
  }

  listTasks(instance: string): Promise<TaskContainer[]> {
    this.calls.push(`list ${instance}`);
    return Promise.resolve([...this.tasks]);
  }

  kill(id: string, signal: string): Promise<void> {
    this.calls.push(`kill ${id} ${signal}`);
    if (!this.tasks.some((t) => t.id === id))
      return Promise.reject(new SpcdError('ENGINE_NOT_FOUND', `no container ${id}`));
    return Promise.resolve();
  }

  remove(id: string): Promise<void> {
    this.calls.push(`remove ${id}`);
    if (!this.sticky.has(id)) this.tasks = this.tasks.filter((t) => t.id !== id);
    return Promise.resolve();
  }
}

const task = (id: string, container: string, generation: number, running = true): TaskContainer => ({
  id,
  name: `${container}.g${generation}.task-db_sync`,
  task: 'db_sync',
  running,
  identity: { instance: 'i', set: 's', container, generation, specHash: 'h', configHash: 'none' },
});

const depsOf = (engine: FakeTaskEngine): TaskOrphanDeps => ({ engine, instance: 'i', log: silentLogger() });

describe('removeTaskOrphans', () => {
  it("kills then removes one container's leftover task containers, and leaves others' alone", async () => {
    const engine = new FakeTaskEngine([task('a1', 'nova_api', 3), task('b1', 'keystone', 2, false)]);
    expect(await removeTaskOrphans(depsOf(engine), 'nova_api')).toEqual(['nova_api.g3.task-db_sync']);
    expect(engine.calls).toEqual(['list i', 'kill a1 SIGKILL', 'remove a1', 'list i']);
    expect(engine.tasks.map((t) => t.id)).toEqual(['b1']);
  });

  it('at start-up removes every task container of the instance; one already gone is fine', async () => {
    const engine = new FakeTaskEngine([task('a1', 'nova_api', 3), task('b1', 'keystone', 2, false)]);
    const kill = engine.kill.bind(engine);
    engine.kill = (id, signal) => {
      if (id === 'b1') engine.tasks = engine.tasks.filter((t) => t.id !== 'b1');
      return kill(id, signal);
    };
    expect(await removeTaskOrphans(depsOf(engine))).toHaveLength(2);
    expect(engine.tasks).toEqual([]);
  });

  it('refuses (CONFLICT) while a leftover task container is still there, so no task starts beside it', async () => {
    const engine = new FakeTaskEngine([task('a1', 'nova_api', 3)]);
    engine.sticky.add('a1');
    await expect(removeTaskOrphans(depsOf(engine), 'nova_api')).rejects.toMatchObject({
      code: 'CONFLICT',
      details: { container: 'nova_api', task: 'db_sync' },
    });
  });

  it('nothing to do costs one listing', async () => {
    const engine = new FakeTaskEngine([task('b1', 'keystone', 2)]);
    expect(await removeTaskOrphans(depsOf(engine), 'nova_api')).toEqual([]);
    expect(engine.calls).toEqual(['list i']);
  });
});
