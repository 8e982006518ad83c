import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { DaemonStatus } from '../../agent/status/status-view.js';
import type { BackoffPolicy } from '../../agent/model/backoff.js';
import type { SpcdEvent } from '../../agent/model/events.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { specHash } from '../../agent/model/hash.js';
import type { Intent } from '../../agent/planner/types.js';
import type { IntentResult } from '../../agent/reconciler/intents.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import type { CallKind } from '../support/fake-engine.js';
import { FakeProcess, INSTANCE } from '../support/fake-executor.js';
import {
  desired,
  fakeReconciler,
  run,
  settle,
  until,
  type FakeHealthRoom,
} from '../support/fake-reconciler.js';
import { upgradeIntent } from '../support/planner.js';
import { amqpCheck, containerSpec } from '../support/spec.js';
import { waitFor } from '../support/wait.js';

/**
 * The reconciler against the fake engine and the fake clock: exits and
 * backoff, a heal whose end races a listing, an engine outage, an operator
 * verb racing a heal. No Docker engine.
 */
const POLICY: BackoffPolicy = { baseMs: 1_000, capMs: 8_000, stableMs: 60_000, crashLoopAfter: 3 };
const SVC = containerSpec('svc', { image: 'img:1' });
const CHECKED: ContainerSpec = { ...SVC, healthchecks: [amqpCheck('svc')] };

let proc: FakeProcess | undefined;
let reconciler: Reconciler | undefined;
afterEach(async () => {
  // A test that failed half way may leave a call hanging: let it end so stop() does not wait for ever.
  proc?.engine.answerHung();
  await reconciler?.stop();
  await proc?.close();
  proc = reconciler = undefined;
});

async function started(
  spec: ContainerSpec,
): Promise<{ p: FakeProcess; rec: Reconciler; room: FakeHealthRoom; id: string }> {
  const p = await FakeProcess.create();
  proc = p;
  p.engine.addImage(spec.image);
  const { rec, room } = fakeReconciler(p, { backoff: POLICY, relistMs: 5_000 });
  reconciler = rec;
  await rec.start([desired(spec)]);
  await until(
    p.clock,
    'created, running, listed by a pass, free (and watched when it has checks)',
    () =>
      p.engine.byName(spec.name)?.state === 'running' &&
      // The pass that created it listed before the create: the next pass lists it.
      rec.primary(spec.name)?.state === 'running' &&
      rec.factsOf(spec.name).operation === null &&
      (spec.healthchecks.length === 0 || room.watches.has(spec.name)),
  );
  const id = p.engine.byName(spec.name)?.id ?? '';
  return { p, rec, room, id };
}

const stateEvents = (p: FakeProcess): string[] =>
  p.events.flatMap((e: SpcdEvent) => (e.type === 'state' ? [`${e.container}:${e.to}`] : []));

describe('exits and backoff', () => {
  it('restarts the first exit at once, then waits the backoff, and calls it crash-looping after 3', async () => {
    const { p, rec, id } = await started(SVC);
    const starts = (): number => p.engine.calls.filter((c) => c.kind === 'start' && c.arg === id).length;
    const before = starts();
    p.engine.exit(id, 1);
    expect(await until(p.clock, 'first restart', () => starts() === before + 1)).toBeLessThan(500);
    expect(rec.factsOf('svc').backoff.failures).toBe(1);

    // Second exit: 1 s of backoff before the restart; the plan says it waits.
    p.engine.exit(id, 1);
    await until(p.clock, 'the exit counted', () => rec.factsOf('svc').backoff.failures === 2);
    expect(rec.preview().waiting.map((w) => w.container)).toContain('svc');
    const second = await until(p.clock, 'second restart', () => starts() === before + 2);
    expect(second).toBeGreaterThanOrEqual(900);
    expect(second).toBeLessThan(3_000);

    // Third exit: crash-looping, still retried (after 2 s).
    p.engine.exit(id, 1);
    await until(p.clock, 'crash-looping', () => rec.crashLooping('svc'));
    expect(stateEvents(p).filter((e) => e !== 'svc:running')).toEqual([
      'svc:exited',
      'svc:exited',
      'svc:crash-looping',
    ]);
    const third = await until(p.clock, 'third restart', () => starts() === before + 3);
    expect(third).toBeGreaterThanOrEqual(1_900);
    expect(rec.factsOf('svc').restartCount).toBe(3);
  });

  it('an operator stop is no failure: the exit is seen, not counted, and it stays stopped', async () => {
    const { p, rec, id } = await started(SVC);
    await p.deps.state.setOperatorStopped('svc', true);
    await p.engine.stop(id, 0);
    await run(p.clock, 20_000, 100);
    expect(p.engine.byName('svc')?.state).toBe('exited');
    expect(rec.factsOf('svc').backoff.failures).toBe(0);
  });
});

describe('a heal that ends while a listing is out', () => {
  it('the late listing (it saw the container stopped mid-heal) counts no exit and starts nothing', async () => {
    const { p, rec, room, id } = await started(CHECKED);
    expect(room.watches.get('svc')?.containerId).toBe(id);
    // The heal's start hangs: the container is stopped and still locked.
    p.engine.fault({ kind: 'start', nth: 1, hang: true });
    room.fire('svc', id, 'restart');
    await waitFor('the heal stops it and hangs in start', () => p.engine.hanging().includes('start'), {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
    expect(rec.factsOf('svc').operation?.kind).toBe('heal');
    // A pass lists now (sees it exited) and its answer comes late...
    p.engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    rec.trigger();
    await run(p.clock, 10, 10);
    await waitFor('the listing is out', () => p.engine.hanging().includes('listManaged'), {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
    // ...after the heal ended.
    p.engine.answerHung('start');
    await waitFor('the heal released it', () => rec.factsOf('svc').operation === null, {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
    const startsBefore = p.engine.count('start');
    p.engine.answerHung('listManaged');
    await run(p.clock, 3_000, 100);
    expect(p.engine.count('start')).toBe(startsBefore);
    expect(rec.factsOf('svc')).toMatchObject({
      restartCount: 1,
      backoff: expect.objectContaining({ failures: 1 }),
    });
    expect(stateEvents(p)).not.toContain('svc:exited');
    // The next pass watches the new start afresh.
    expect(room.watches.get('svc')?.startedAtMs).toBe(Date.parse(p.engine.byName('svc')?.startedAt ?? ''));
  });
});

describe('engine outage', () => {
  it('takes no action while the engine is away, says so once, and converges when it answers', async () => {
    const { p, rec, id } = await started(SVC);
    p.engine.fault({ kind: 'listManaged', fail: new SpcdError('ENGINE_UNAVAILABLE', 'connect ENOENT') });
    p.engine.dropEvents();
    await run(p.clock, 6_000, 500);
    expect(rec.engineStatus()).toEqual({ available: false, reason: 'connect ENOENT' });
    p.engine.exit(id, 1);
    const starts = p.engine.count('start');
    await run(p.clock, 10_000, 500);
    expect(p.engine.count('start')).toBe(starts);
    p.engine.clearFaults();
    await run(p.clock, 2_000, 100);
    expect(rec.engineStatus().available).toBe(true);
    expect(p.engine.byName('svc')?.state).toBe('running');
    const engine = p.events.flatMap((e) => (e.type === 'engine' ? [e.available] : []));
    expect(engine).toEqual([true, false, true]);
  });

  it('a stalled event stream hides an exit until the periodic re-list finds it', async () => {
    const { p, rec, id } = await started(SVC);
    // A pass now: the next periodic one is 5 s away.
    const lists = p.engine.count('listManaged');
    rec.trigger();
    await until(p.clock, 'a pass', () => p.engine.count('listManaged') === lists + 1);
    p.engine.stallEvents();
    p.engine.exit(id, 2);
    const waited = await until(p.clock, 'restarted', () => p.engine.byName('svc')?.state === 'running', {
      stepMs: 100,
    });
    expect(waited).toBeGreaterThanOrEqual(4_500);
    expect(waited).toBeLessThanOrEqual(5_500);
    expect(p.engine.count('listManaged')).toBe(lists + 2);
  });
});

describe('an operator verb racing a heal', () => {
  it('while a heal has the container locked, an operator restart gets CONFLICT and the status is not upgrading', async () => {
    const { p, rec, room, id } = await started(CHECKED);
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    room.fire('svc', id, 'restart');
    await waitFor('the heal has it locked', () => p.engine.hanging().includes('stop'), {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
    const restart = () =>
      rec.request('svc', { verb: 'restart', operation: { id: 'restart-1', kind: 'restart' } });
    expect(restart).toThrow(expect.objectContaining({ code: 'CONFLICT' }));
    expect(statusOf(p, rec)).toBe('running');
    p.engine.answerHung('stop');
    await waitFor('the heal ends', () => rec.factsOf('svc').operation === null, {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
  });

  it("while an operator's upgrade has it locked, a failing check is ignored (no heal later) and the status is upgrading", async () => {
    const { p, rec, room, id } = await started(CHECKED);
    const { outcome } = await lockWith(p, rec, UPGRADE, 'pull');
    expect(statusOf(p, rec)).toBe('upgrading');
    room.fire('svc', id, 'restart');
    expect(rec.factsOf('svc').pendingHeal).toBeNull();
    // The pull passes its deadline: the upgrade fails before it changes anything, the old one runs on.
    p.engine.releaseHung('pull');
    await expect(outcome).rejects.toMatchObject({ code: 'ENGINE_TIMEOUT' });
    const starts = p.engine.count('start');
    await run(p.clock, 3_000, 100);
    expect(p.engine.count('start')).toBe(starts);
    expect(statusOf(p, rec)).toBe('running');
  });

  it('an operator stop that has it locked shows the container as it is, not upgrading', async () => {
    const { p, rec } = await started(SVC);
    const stop: Intent = { verb: 'stop', operation: { id: 'stop-1', kind: 'stop' } };
    const { outcome } = await lockWith(p, rec, stop, 'stop');
    expect(statusOf(p, rec)).toBe('running');
    p.engine.answerHung('stop');
    await outcome;
    await settle();
  });
});

/** The operator's upgrade of svc to img:2 (not on the host: it is pulled). */
const UPGRADE = upgradeIntent({ ...CHECKED, image: 'img:2' }, specHash(CHECKED));

/**
 * Writes the operator's intent and resolves once its step has svc locked, waiting
 * on the engine call `hangs` (hung until the test lets it go); `outcome` is
 * the step's.
 */
async function lockWith(
  p: FakeProcess,
  rec: Reconciler,
  intent: Intent,
  hangs: CallKind,
): Promise<{ outcome: Promise<IntentResult> }> {
  p.engine.fault({ kind: hangs, nth: 1, hang: true });
  const outcome = rec.request('svc', intent);
  outcome.catch(() => undefined);
  await until(p.clock, `the ${intent.verb} has svc locked`, () => p.engine.hanging().includes(hangs));
  expect(rec.factsOf('svc').operation).toEqual(intent.operation);
  return { outcome };
}

function statusOf(p: FakeProcess, rec: Reconciler): string | undefined {
  const view = new DaemonStatus({
    reconciler: rec,
    state: p.deps.state,
    events: p.bus,
    logs: p.engine,
    health: { snapshot: () => undefined },
    definitions: () => [],
    version: 'test',
    instance: INSTANCE,
    hostFacts: async () => ({}),
    plan: async () => ({ items: [], problems: [] }),
  });
  return view.container('svc')?.state;
}
