import { afterEach, describe, expect, it } from 'vitest';
import type { OperationRef } from '../../agent/api/types.js';
import { DaemonActions } from '../../agent/daemon/actions.js';
import { Operations } from '../../agent/reconciler/operations.js';
import { silentLogger } from '../../agent/log.js';
import type { BackoffPolicy } from '../../agent/model/backoff.js';
import { specHash } from '../../agent/model/hash.js';
import type { ContainerSpec, DesiredState } from '../../agent/model/spec.js';
import { desiredContainers } from '../../agent/planner/pins.js';
import { ContainerLedger } from '../../agent/reconciler/ledger.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import { EXECUTORS, type Executors } from '../../agent/reconciler/steps.js';
import { FakeProcess, INSTANCE } from '../support/fake-executor.js';
import { desired, fakeReconciler, run, until, type FakeHealthRoom } from '../support/fake-reconciler.js';
import { BY_HEAL, BY_PLAN, byOperator, upgradeIntent } from '../support/planner.js';
import { stepRunner } from '../support/steps.js';
import { amqpCheck, containerSpec } from '../support/spec.js';

/**
 * The operator's intents as planner input (decision 0023): a verb writes its
 * intent and answers with the operation a pass carries out; the lasting
 * intents (the operator's stop, a pin) outlive the reconciler; every step kind runs
 * through the one executor table. Fake engine, fake clock, no Docker.
 */
const POLICY: BackoffPolicy = { baseMs: 1_000, capMs: 8_000, stableMs: 60_000, crashLoopAfter: 3 };
const SVC = containerSpec('svc', { image: 'img:1' });
const CHECKED: ContainerSpec = { ...SVC, healthchecks: [amqpCheck('svc')] };

const definitions = (spec: ContainerSpec): DesiredState => ({
  sets: [{ name: 's', path: 's', description: '', defaults: {}, containers: [spec], sets: [], source: 't' }],
});

const open: { p: FakeProcess; rec: Reconciler }[] = [];
afterEach(async () => {
  const rigs = open.splice(0);
  for (const { p, rec } of rigs) {
    p.engine.answerHung();
    await rec.stop();
  }
  // A restarted process shares its directory with the first: removed once.
  await rigs[0]?.p.close();
});

interface Rig {
  p: FakeProcess;
  rec: Reconciler;
  room: FakeHealthRoom;
  actions: DaemonActions;
  id: string;
}

/** A reconciler over `p` with the definitions of `spec` (pins applied), converged, and the operator's verbs. */
async function rig(spec: ContainerSpec, proc?: FakeProcess): Promise<Rig> {
  const p = proc ?? (await FakeProcess.create());
  p.engine.addImage(spec.image);
  const { rec, room } = fakeReconciler(p, { backoff: POLICY, relistMs: 5_000 });
  open.push({ p, rec });
  const defs = definitions(spec);
  const operations = new Operations({ events: p.bus, clock: p.clock, log: silentLogger() });
  const actions = new DaemonActions({
    reconciler: rec,
    exec: p.deps,
    unlabeled: p.deps.engine,
    operations,
    definitions: () => defs,
    reload: async () => ({}),
  });
  await rec.start(desiredContainers(defs, p.deps.state, () => 'none'));
  await until(
    p.clock,
    'present and free',
    () => p.engine.byName(spec.name) !== undefined && rec.factsOf(spec.name).operation === null,
  );
  return { p, rec, room, actions, id: p.engine.byName(spec.name)?.id ?? '' };
}

/** The phases the operation published, in order. */
const phases = (p: FakeProcess, ref: OperationRef): string[] =>
  p.events.flatMap((e) => (e.type === 'operation' && e.operationId === ref.operationId ? [e.phase] : []));

const ended = (p: FakeProcess, ref: OperationRef) => (): boolean =>
  phases(p, ref).some((x) => x === 'succeeded' || x === 'failed');

const calls = (p: FakeProcess, kind: 'stop' | 'start' | 'create', id?: string): number =>
  p.engine.calls.filter((c) => c.kind === kind && (id === undefined || c.arg === id)).length;

describe('an operator verb writes an intent a pass carries out', () => {
  it('answers with the operation at once, the status shows it, and the pass publishes its outcome', async () => {
    const { p, rec, actions, id } = await rig(SVC);
    const ref = await actions.restart('svc', {});
    expect(ref).toMatchObject({ kind: 'restart', target: 'svc' });
    expect(rec.factsOf('svc').operation).toEqual({ id: ref.operationId, kind: 'restart' });
    await expect(actions.stop('svc', {})).rejects.toMatchObject({ code: 'CONFLICT' });
    await until(p.clock, 'the restart ended', ended(p, ref));
    expect(phases(p, ref)).toEqual(['accepted', 'succeeded']);
    expect([calls(p, 'stop', id), calls(p, 'start', id)]).toEqual([1, 2]);
    const result = p.events.find((e) => e.type === 'operation' && e.phase === 'succeeded');
    expect(result).toMatchObject({ result: { generation: 1, windowMs: expect.any(Number) } });
  });

  it('an operator restart racing a heal restarts once', async () => {
    const { p, rec, room, actions, id } = await rig(CHECKED);
    // The check saw an instance the last listing does not show yet: its heal is noted, and waits for a pass.
    room.fire('svc', 'not-yet-listed', 'restart');
    expect(rec.factsOf('svc').pendingHeal).not.toBeNull();
    const ref = await actions.restart('svc', {});
    await until(p.clock, 'the restart ended', ended(p, ref));
    expect(phases(p, ref)).toEqual(['accepted', 'succeeded']);
    await run(p.clock, 6_000, 250);
    expect(calls(p, 'stop', id)).toBe(1);
    expect(rec.factsOf('svc').pendingHeal).toBeNull();
  });

  it('an intent written while a pass runs is carried out (once) when the pass or the next one plans it', async () => {
    const { p, rec, actions, id } = await rig(SVC);
    p.engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    rec.trigger();
    await until(p.clock, 'a pass waits on its listing', () => p.engine.hanging().includes('listManaged'));
    const ref = await actions.restart('svc', {});
    await run(p.clock, 1_000, 100);
    expect(calls(p, 'stop', id)).toBe(0);
    p.engine.answerHung('listManaged');
    await until(p.clock, 'the restart ended', ended(p, ref));
    await run(p.clock, 6_000, 250);
    expect(phases(p, ref)).toEqual(['accepted', 'succeeded']);
    expect(calls(p, 'stop', id)).toBe(1);
  });
});

describe('the lasting intents outlive the reconciler', () => {
  it('an operator stop stays stopped after a restart of spcd', async () => {
    const first = await rig(SVC);
    const ref = await first.actions.stop('svc', {});
    await until(first.p.clock, 'the stop ended', ended(first.p, ref));
    expect(first.p.deps.state.record('svc')?.heldStopped).toBe(true);
    await first.rec.stop();

    const next = await rig(SVC, await first.p.restart());
    await run(next.p.clock, 12_000, 250);
    expect(next.p.engine.byName('svc')?.state).toBe('exited');
    expect(next.rec.currentPlan().waiting).toContainEqual({
      container: 'svc',
      reason: 'stopped by operator',
    });
  });

  it("an operator's upgrade is pinned: the next spcd keeps it, not the definition's image", async () => {
    const first = await rig(SVC);
    first.p.engine.addImage('img:2');
    const ref = await first.actions.upgrade('svc', { image: 'img:2' });
    await until(first.p.clock, 'the upgrade ended', ended(first.p, ref));
    expect(phases(first.p, ref)).toEqual(['accepted', 'succeeded']);
    expect(first.p.deps.state.record('svc')?.pin?.spec.image).toBe('img:2');
    await first.rec.stop();

    const next = await rig(SVC, await first.p.restart());
    const creates = calls(next.p, 'create');
    await run(next.p.clock, 12_000, 250);
    expect(calls(next.p, 'create')).toBe(creates);
    expect(next.p.engine.byName('svc')).toMatchObject({ state: 'running', image: 'img:2' });
  });
});

describe('the executor table', () => {
  it('runs every step kind', async () => {
    const p = await FakeProcess.create();
    p.engine.addImage('img:1');
    p.engine.addImage('img:2');
    const ledger = new ContainerLedger(POLICY);
    const pinned: string[] = [];
    const step = stepRunner(ledger, p.deps, { pinned: (spec) => void pinned.push(spec.image) });
    const d = desired(SVC);
    const observed = async () => {
      const o = await p.engine.inspect(p.engine.byName('svc')?.id ?? 'none');
      if (!o) throw new Error('svc is gone');
      return o;
    };
    const state = () => p.engine.byName('svc')?.state;
    const op = { id: 'op', kind: 'restart' } as const;

    await step({ kind: 'create', desired: d, reason: 'not present', origin: BY_PLAN });
    expect(state()).toBe('running');

    expect(
      await step({
        kind: 'stop',
        desired: d,
        observed: await observed(),
        reason: 'r',
        origin: byOperator(op),
      }),
    ).toEqual({
      generation: 1,
    });
    expect([state(), p.deps.state.record('svc')?.heldStopped]).toEqual(['exited', true]);

    await step({
      kind: 'start',
      desired: d,
      observed: await observed(),
      reason: 'r',
      origin: byOperator(op),
    });
    expect([state(), p.deps.state.record('svc')?.heldStopped]).toEqual(['running', false]);

    const r = await step({
      kind: 'restart',
      desired: d,
      observed: await observed(),
      reason: 'r',
      origin: byOperator(op),
    });
    expect(r).toMatchObject({ generation: 1, windowMs: expect.any(Number) });

    ledger.unhealthy('svc', 'restart', 'probe failed', 'check probe failed 3 times', p.clock.now());
    await step({ kind: 'restart', desired: d, observed: await observed(), reason: 'heal', origin: BY_HEAL });
    expect(ledger.of('svc')).toMatchObject({ pendingHeal: null, restartCount: 1 });
    expect(p.events.some((e) => e.type === 'state' && e.to === 'restarting')).toBe(true);

    const v2 = desired({ ...SVC, image: 'img:2' });
    await step({
      kind: 'replace',
      desired: v2,
      observed: await observed(),
      reason: 'spec changed',
      origin: BY_PLAN,
    });
    expect(p.engine.byName('svc')).toMatchObject({ state: 'running', image: 'img:2' });

    const back = { ...SVC, image: 'img:1' };
    const intent = upgradeIntent({ ...SVC, image: 'img:2' }, specHash(back), 'op-up');
    await step({
      kind: 'upgrade',
      desired: d,
      observed: await observed(),
      reason: 'upgrade requested',
      intent,
      origin: byOperator(intent.operation),
    });
    expect(p.deps.state.record('svc')?.pin?.spec.image).toBe('img:2');
    expect(pinned).toEqual(['img:2']);

    ledger.unhealthy('svc', 'stop', 'probe failed', 'check probe failed 3 times', p.clock.now());
    await step({ kind: 'stop', desired: d, observed: await observed(), reason: 'heal', origin: BY_HEAL });
    expect(state()).toBe('exited');
    expect(p.events.some((e) => e.type === 'state' && e.to === 'failed')).toBe(true);

    const last = await observed();
    await step({
      kind: 'remove',
      observed: last,
      reason: 'definition deleted',
      definitionDeleted: true,
      origin: BY_PLAN,
    });
    expect(p.engine.byName('svc')).toBeUndefined();

    // A container spcd did not create, under a desired name: adopted, not started or stopped.
    const kolla = p.engine.addUnlabeled('svc', SVC.image);
    const identity = {
      instance: INSTANCE,
      set: SVC.set,
      container: 'svc',
      generation: 1,
      specHash: d.specHash,
      configHash: 'none',
    };
    const candidate = await p.engine.inspectUnlabeled('svc', { spec: SVC, identity });
    if (!candidate) throw new Error('the unlabeled svc is not seen');
    const adoptOp = { id: 'op-adopt', kind: 'adopt' } as const;
    const calls = p.engine.calls.length;
    const adopted = await step({
      kind: 'adopt',
      desired: d,
      candidate: { container: candidate },
      managed: undefined,
      reason: 'r',
      origin: byOperator(adoptOp),
    });
    expect(adopted).toEqual({ generation: p.deps.state.record('svc')?.adopted?.generation });
    expect(p.deps.state.record('svc')?.adopted?.id).toBe(kolla.id);
    expect(p.engine.calls.slice(calls).map((c) => c.kind)).toEqual(['inspectUnlabeled']);
    await p.close();
  });

  it('has an executor of the right kind for every step kind (else it does not compile)', () => {
    const { remove: _remove, ...withoutRemove } = EXECUTORS;
    // @ts-expect-error -- a step kind without its executor
    const missing: Executors = withoutRemove;
    // @ts-expect-error -- an executor of another kind
    const wrong: Executors = { ...EXECUTORS, remove: EXECUTORS.create };
    expect(Object.keys(missing).sort()).toEqual([
      'adopt',
      'create',
      'recover',
      'replace',
      'restart',
      'start',
      'stop',
      'upgrade',
    ]);
    expect(wrong.remove).toBe(EXECUTORS.create);
  });
});
