import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpcdError, isSpcdError } from '../../agent/errors.js';
import { stepContainer } from '../../agent/planner/plan.js';
import type { ExecutorDeps } from '../../agent/executor/ports.js';
import { recoverJournal } from '../../agent/executor/recover.js';
import { upgradeContainer } from '../../agent/executor/upgrade.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import { Reconciler } from '../../agent/reconciler/reconciler.js';
import { waitFor } from '../support/wait.js';
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

/** The harness's executor, with an engine whose stop of any container but `keep` passes its deadline (while `stuck()`). */
function stuckStops(keep: string, graces: number[], stuck: () => boolean = () => true): ExecutorDeps {
  const real = h.deps.engine;
  const engine = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'stop')
        return async (id: string, graceMs: number): Promise<void> => {
          if (id === keep || !stuck()) return real.stop(id, graceMs);
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

  it('in a running reconciler: the container is quarantined, its parked instance kept, and a reload finishes the undo', async () => {
    const name = `${h.instance}-live`;
    const spec = await h.spec(name, body('spcd-demo/service:1'));
    const oldId = await h.createFirst(spec);
    let stuck = true;
    const exec = stuckStops(oldId, [], () => stuck);
    const d = (s: ContainerSpec) => ({ spec: s, specHash: specHash(s), configHash: 'none' });
    const r = new Reconciler({
      engine: h.engine,
      exec,
      health: h.healthSync,
      events: h.events,
      log: silentLogger(),
      clock: systemClock,
      instance: h.instance,
      relistMs: 500,
    });
    await r.start([d(spec)]);
    try {
      r.setDesired([d({ ...spec, image: 'spcd-demo/service:unhealthy' })]);
      const q = await waitFor('quarantined after its rollback failed', () => r.quarantine.get(name), {
        timeoutMs: 30_000,
      });
      expect(q.reason).toMatch(/^ROLLBACK_FAILED/);
      expect(h.seen.some((e) => e.type === 'state' && e.container === name && e.to === 'quarantined')).toBe(
        true,
      );
      // Passes after the release leave it alone: the parked old instance is not removed as an extra one.
      await waitFor('a pass that plans around the quarantine', () =>
        r.currentPlan().waiting.some((w) => w.container === name && w.reason.startsWith('quarantined:')),
      );
      const mine = r.currentPlan().steps.filter((x) => stepContainer(x) === name);
      expect(mine).toEqual([]);
      expect((await h.instances(name)).map((o) => o.id)).toContain(oldId);
      // The stuck process dies; the operator reverts the definition and reloads: the undo finishes.
      stuck = false;
      r.setDesired([d(spec)]);
      // (The entry test 2 left, for another container, stays quarantined: it was never resolved.)
      expect((await r.retryQuarantined()).quarantined).toEqual([`${h.instance}-gone`]);
      const all = await h.instances(name);
      expect(all.map((o) => [o.id, o.name, o.state])).toEqual([[oldId, name, 'running']]);
      expect(h.journalFiles()).toEqual([`${encodeURIComponent(`${h.instance}-gone`)}.json`]);
    } finally {
      await r.stop();
      // stop() waits for the pass in flight (up to its deadline): none runs when the health room closes.
      await waitFor('no pass in flight', () => !r.passInFlight());
    }
  });
});
