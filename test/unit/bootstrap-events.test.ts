import { afterEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { FakeProcess } from '../support/fake-executor.js';
import { containerSpec } from '../support/spec.js';

/**
 * A container's bootstrap tasks (agent/executor/bootstrap.ts) as the
 * operation's steps report them: each task a begin and a done, or a failed
 * with why, under the operation and the generation; the task's container is
 * removed either way. Fake engine, fake clock.
 */
const task = { name: 'db-sync', command: ['sync'], timeoutMs: 60_000, acceptExitCodes: [0] };
const SVC: ContainerSpec = { ...containerSpec('svc', { image: 'img:1' }), bootstrap: [task] };

let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

const steps = (p: FakeProcess) =>
  p.events.flatMap((e) =>
    e.type === 'upgrade-step' && e.step.startsWith('bootstrap:')
      ? [{ step: e.step, outcome: e.outcome, generation: e.generation, op: e.operationId, detail: e.detail }]
      : [],
  );

describe('bootstrap task steps', () => {
  it('reports a task that exits with an accepted code as begin and done', async () => {
    const p = (proc = await FakeProcess.create());
    await p.first(SVC);
    expect(steps(p)).toEqual([
      { step: 'bootstrap:db-sync', outcome: 'begin', generation: 1, op: 'op-first', detail: undefined },
      { step: 'bootstrap:db-sync', outcome: 'done', generation: 1, op: 'op-first', detail: undefined },
    ]);
    expect([...p.engine.containers.values()].map((c) => c.name)).toEqual(['svc']);
  });

  it('reports a task that exits with another code as failed, with the code and the accepted ones', async () => {
    const p = (proc = await FakeProcess.create());
    p.engine.crashOnStart('img:1', 3);
    const err = await p.first(SVC).catch((e: unknown) => e);
    expect(isSpcdError(err, 'BOOTSTRAP_FAILED'), String(err)).toBe(true);
    expect(steps(p)).toEqual([
      { step: 'bootstrap:db-sync', outcome: 'begin', generation: 1, op: 'op-first', detail: undefined },
      {
        step: 'bootstrap:db-sync',
        outcome: 'failed',
        generation: 1,
        op: 'op-first',
        detail: 'exited with 3 (accepted: 0)',
      },
    ]);
    expect(p.engine.containers.size).toBe(0);
  });
});
