import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpcdError, isSpcdError } from '../../agent/errors.js';
import type { ExecutorDeps } from '../../agent/executor/ports.js';
import { recoverJournal } from '../../agent/executor/recover.js';
import { upgradeContainer } from '../../agent/executor/upgrade.js';
import { specHash } from '../../agent/model/hash.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { cleanupInstance, docker } from '../support/docker.js';
import { UpgradeHarness } from '../support/upgrade-harness.js';

/**
 * A rollback whose stop of the new container runs into its deadline (a
 * process stuck in D state, made here by an engine whose stop of that one
 * container times out), on a real engine: the stop asks for the container's
 * own grace, the journal entry stays, and recovery later finishes the undo
 * (old instance back, same id) or, when the old instance was removed
 * meanwhile, keeps the new one running and quarantines the entry, never
 * removing the only instance left.
 */
let h: UpgradeHarness;

beforeAll(async () => {
  h = await UpgradeHarness.create('rbstop', { gateDeadlineMs: 20_000, minReadyMs: 500 });
});

afterAll(async () => {
  await h?.close();
  if (h) await cleanupInstance(h.instance);
});

const body = (image: string): string => `
image: ${image}
command: [demo-service, sleep]
network: none
stop_grace_period: 3s
healthchecks:
  - { name: demo, exec: [demo-check], interval: 2s, timeout: 1s, failure_threshold: 1 }`;

/** The harness's executor, with an engine whose stop of any container but `keep` passes its deadline. */
function stuckStops(keep: string, graces: number[]): ExecutorDeps {
  const real = h.deps.engine;
  const engine = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'stop')
        return async (id: string, graceMs: number): Promise<void> => {
          if (id === keep) return real.stop(id, graceMs);
          graces.push(graceMs);
          throw new SpcdError('ENGINE_TIMEOUT', `stop ${id.slice(0, 12)} passed its deadline`);
        };
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { ...h.deps, engine };
}

async function failedUpgrade(name: string): Promise<{ spec: ContainerSpec; oldId: string; newId: string }> {
  const spec = await h.spec(name, body('spcd-demo/service:1'));
  const oldId = await h.createFirst(spec);
  const graces: number[] = [];
  const next = { ...spec, image: 'spcd-demo/service:unhealthy' };
  let err: unknown;
  try {
    await upgradeContainer(stuckStops(oldId, graces), {
      operationId: h.nextOp(),
      kind: 'recreate',
      spec: next,
      specHash: specHash(next),
      current: await h.current(name),
      pull: 'missing',
      reason: 'test',
    });
  } catch (e) {
    err = e;
  }
  expect(isSpcdError(err, 'ROLLBACK_FAILED'), String(err)).toBe(true);
  // The new container's own stop grace (stop_grace_period: 3s), not a fixed 10 s.
  expect(graces).toEqual([3_000]);
  // The entry stays; both instances are kept: the new one under the name, the old one parked.
  expect(h.journalFiles()).toEqual([`${encodeURIComponent(name)}.json`]);
  const all = await h.instances(name);
  expect(all.map((o) => [o.name, o.identity.generation]).sort()).toEqual([
    [name, 2],
    [`${name}.g1.old`, 1],
  ]);
  return { spec, oldId, newId: all.find((o) => o.identity.generation === 2)!.id };
}

describe('a rollback whose stop passes its deadline', () => {
  it('leaves a journal entry that recovery finishes later: the old instance is back', async () => {
    const name = `${h.instance}-later`;
    const { oldId, newId } = await failedUpgrade(name);
    const report = await recoverJournal(h.deps);
    expect(report).toMatchObject({ undone: [name], finished: [], quarantined: [] });
    const all = await h.instances(name);
    expect(all.map((o) => [o.id, o.name, o.state])).toEqual([[oldId, name, 'running']]);
    expect(all.some((o) => o.id === newId)).toBe(false);
    expect(h.state.record(name)!.generations.find((g) => g.generation === 2)!.outcome).toBe('rolled-back');
    expect(h.journalFiles()).toEqual([]);
  });

  it('with the old instance removed meanwhile, recovery keeps the new one running and quarantines the entry', async () => {
    const name = `${h.instance}-gone`;
    const { oldId, newId } = await failedUpgrade(name);
    await docker().getContainer(oldId).remove({ force: true });
    await docker().getContainer(newId).stop({ t: 0 });
    const report = await recoverJournal(h.deps);
    expect(report.undone).toEqual([]);
    expect(report.quarantined.map((q) => q.container)).toEqual([name]);
    expect(report.quarantined[0]!.reason).toMatch(/previous instance .* is gone; kept generation 2/);
    // Never removed: the only instance left is named and started again.
    const all = await h.instances(name);
    expect(all.map((o) => [o.id, o.name, o.state])).toEqual([[newId, name, 'running']]);
    expect(h.journalFiles()).toEqual([`${encodeURIComponent(name)}.json`]);
    // An upgrade of a quarantined container is refused: its entry is never overwritten.
    const again = await h
      .upgrade({ ...(await h.spec(name, body('spcd-demo/service:2'))) })
      .catch((e: unknown) => e);
    expect(isSpcdError(again, 'RECOVERY_QUARANTINED'), String(again)).toBe(true);
    expect((await h.instances(name)).map((o) => o.id)).toEqual([newId]);
  });
});
