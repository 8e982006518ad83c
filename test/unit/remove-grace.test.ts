import { afterEach, describe, expect, it } from 'vitest';
import { removeContainer } from '../../agent/executor/simple.js';
import { FakeProcess } from '../support/fake-executor.js';
import { containerSpec } from '../support/spec.js';

/**
 * A container whose definition was deleted is stopped with its own
 * stop_grace_period (a hypervisor's or a database's can be a minute), not a
 * fixed 10 s. No Docker engine.
 */
let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

describe('removing a container whose definition is gone', () => {
  it('stops it with the stop grace its generation was defined with', async () => {
    proc = await FakeProcess.create();
    const o = await proc.first(containerSpec('slow', { image: 'img:1', stopGraceMs: 60_000 }));
    await removeContainer(proc.deps, o, 'definition deleted', false);
    expect(proc.engine.stopGraces).toEqual([{ id: o.id, graceMs: 60_000 }]);
    expect(await proc.engine.inspect(o.id)).toBeUndefined();
  });

  it('a container with no generation on record (a stray) gets the default 10 s', async () => {
    proc = await FakeProcess.create();
    const o = await proc.first(containerSpec('stray', { image: 'img:1', stopGraceMs: 60_000 }));
    const stray = { ...o, identity: { ...o.identity, generation: 99 } };
    await removeContainer(proc.deps, stray, 'stray', false);
    expect(proc.engine.stopGraces).toEqual([{ id: o.id, graceMs: 10_000 }]);
  });
});
