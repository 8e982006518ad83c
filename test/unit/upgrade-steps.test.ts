import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { FAILPOINTS } from '../../agent/executor/failpoint.js';
import { recoverJournal } from '../../agent/executor/recover.js';
import { upgradeContainer, type UpgradeRequest } from '../../agent/executor/upgrade.js';
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { UpgradeStep } from '../../agent/state/journal.js';
import type { Fault } from '../support/fake-engine.js';
import { FakeProcess, Killed } from '../support/fake-executor.js';
import { waitFor } from '../support/wait.js';
import { amqpCheck } from '../support/spec.js';
import { roadOf } from '../support/recovery-fixture.js';
import { engineView, NEXT, OLD, upgradeTo } from '../support/upgrade-fixture.js';

/**
 * The upgrade transaction step by step against the fake engine: each step
 * failing (or hanging past its deadline) rolls back to the old generation;
 * a kill at each failpoint leaves a journal that the next spcd finishes,
 * rolls forward or undoes. No Docker engine.
 */
let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

async function setup(): Promise<{ p: FakeProcess; old: ObservedContainer; req: UpgradeRequest }> {
  const p = await FakeProcess.create();
  proc = p;
  const old = await p.first(OLD);
  p.engine.addImage(NEXT.image);
  return { p, old, req: upgradeTo(old) };
}

async function journalSteps(p: FakeProcess): Promise<UpgradeStep[]> {
  return (await p.deps.journal.scan()).entries.map((e) => e.step);
}

const engineError = new SpcdError('ENGINE_FAILED', 'injected');

describe('upgrade transaction, step by step', () => {
  it('succeeds: generation 2 runs under the name, the old one is gone, the journal is empty', async () => {
    const { p, req } = await setup();
    const r = await upgradeContainer(p.deps, req);
    expect(r).toMatchObject({ generation: 2, previousGeneration: 1, image: 'img:2' });
    expect(engineView(p)).toEqual(['svc:running:g2']);
    expect(await journalSteps(p)).toEqual([]);
    expect(p.deps.state.generation('svc', 2)?.outcome).toBe('current');
    expect(p.deps.state.generation('svc', 1)?.outcome).toBe('superseded');
    const steps = p.events.flatMap((e) => (e.type === 'upgrade-step' ? [`${e.step}:${e.outcome}`] : []));
    expect(steps).toEqual([
      'pull:begin',
      'pull:done',
      'create:begin',
      'create:done',
      'stop-old:begin',
      'stop-old:done',
      'start-new:begin',
      'start-new:done',
      'health-gate:begin',
      'health-gate:done',
      'commit:done',
    ]);
  });

  // Each fault is armed after generation 1 runs: nth counts calls of the upgrade only.
  const cases: {
    name: string;
    fault: Fault;
    code: string;
    /** Generation 2's outcome afterwards; null: never allocated. */
    outcome: string | null;
  }[] = [
    {
      name: 'image lookup fails',
      fault: { kind: 'imageInfo', nth: 1, fail: engineError },
      code: 'ENGINE_FAILED',
      outcome: null,
    },
    {
      name: 'create fails',
      fault: { kind: 'create', nth: 1, fail: engineError },
      code: 'ENGINE_FAILED',
      outcome: 'failed',
    },
    {
      name: 'renaming the old fails',
      fault: { kind: 'rename', nth: 1, fail: engineError },
      code: 'UPGRADE_FAILED',
      outcome: 'rolled-back',
    },
    {
      name: 'renaming the new fails',
      fault: { kind: 'rename', nth: 2, fail: engineError },
      code: 'UPGRADE_FAILED',
      outcome: 'rolled-back',
    },
    {
      name: 'stopping the old fails',
      fault: { kind: 'stop', nth: 1, fail: engineError },
      code: 'UPGRADE_FAILED',
      outcome: 'rolled-back',
    },
    {
      name: 'starting the new fails',
      fault: { kind: 'start', nth: 1, fail: engineError },
      code: 'UPGRADE_FAILED',
      outcome: 'rolled-back',
    },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.code}, the old generation runs under its name, nothing left over`, async () => {
      const { p, req } = await setup();
      p.engine.fault(c.fault);
      await expect(upgradeContainer(p.deps, req)).rejects.toMatchObject({ code: c.code });
      expect(engineView(p)).toEqual(['svc:running:g1']);
      expect(await journalSteps(p)).toEqual([]);
      expect(p.deps.state.generation('svc', 2)?.outcome ?? null).toBe(c.outcome);
      expect(p.deps.state.generation('svc', 1)?.outcome).toBe('current');
      const end = p.events.find((e) => e.type === 'upgrade');
      expect(end).toMatchObject({ outcome: expect.any(String), code: c.code });
    });
  }

  it('a definition the engine cannot run: the old generation runs on, the target remembered as failed', async () => {
    const { p, req } = await setup();
    p.engine.fault({
      kind: 'create',
      nth: 1,
      fail: new SpcdError('ENGINE_UNSUPPORTED', 'init with pid host'),
    });
    await expect(upgradeContainer(p.deps, req)).rejects.toMatchObject({ code: 'ENGINE_UNSUPPORTED' });
    expect(engineView(p)).toEqual(['svc:running:g1']);
    expect(await journalSteps(p)).toEqual([]);
    expect(p.deps.state.record('svc')?.failedTarget).toEqual({
      specHash: req.specHash,
      configHash: expect.any(String),
      generation: 2,
    });
  });

  it('a pull that fails changes nothing (not even a generation number)', async () => {
    const { p, req } = await setup();
    const next = { ...NEXT, image: 'img:3' };
    p.engine.addRemoteImage('img:3');
    p.engine.fault({ kind: 'pull', nth: 1, fail: new SpcdError('IMAGE_PULL_FAILED', 'registry away') });
    await expect(
      upgradeContainer(p.deps, { ...req, spec: next, specHash: specHash(next) }),
    ).rejects.toMatchObject({
      code: 'IMAGE_PULL_FAILED',
    });
    expect(engineView(p)).toEqual(['svc:running:g1']);
    expect(p.deps.state.record('svc')?.generations.map((g) => g.generation)).toEqual([1]);
  });

  it('the health gate fails: HEALTH_GATE_FAILED, rolled back, the target remembered as failed', async () => {
    const { p, req } = await setup();
    const checked = { ...NEXT, healthchecks: [amqpCheck('nova-compute')] };
    p.health.verdict = (name) => new SpcdError('HEALTH_GATE_FAILED', `${name} unhealthy`);
    await expect(
      upgradeContainer(p.deps, { ...req, spec: checked, specHash: specHash(checked) }),
    ).rejects.toMatchObject({ code: 'HEALTH_GATE_FAILED' });
    expect(engineView(p)).toEqual(['svc:running:g1']);
    expect(p.deps.state.record('svc')?.failedTarget).toMatchObject({ generation: 2 });
    // The gate pointed health at the new instance; the old one has no checks, so the rollback unwatches.
    expect(p.health.watched.has('svc')).toBe(false);
    expect(p.health.paused.has('svc')).toBe(false);
  });

  it('the new generation exits at once: the gate fails without waiting for its deadline', async () => {
    const { p, req } = await setup();
    p.engine.crashOnStart('img:2', 3);
    await expect(upgradeContainer(p.deps, req)).rejects.toMatchObject({ code: 'HEALTH_GATE_FAILED' });
    expect(engineView(p)).toEqual(['svc:running:g1']);
  });

  it('a stop that hangs past its deadline (ENGINE_TIMEOUT) rolls back', async () => {
    const { p, req } = await setup();
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const done = upgradeContainer(p.deps, req).catch((e: unknown) => e);
    await waitFor('the call hangs', () => p.engine.hanging().length > 0, { timeoutMs: 5_000, intervalMs: 1 });
    expect(p.engine.hanging()).toEqual(['stop']);
    p.engine.releaseHung();
    expect(await done).toMatchObject({ code: 'UPGRADE_FAILED' });
    expect(engineView(p)).toEqual(['svc:running:g1']);
  });

  it('a rollback that cannot start the old one: ROLLBACK_FAILED, the journal entry stays for recovery', async () => {
    const { p, req } = await setup();
    p.engine.crashOnStart('img:2', 1);
    p.engine.fault({ kind: 'start', nth: 2, fail: engineError });
    await expect(upgradeContainer(p.deps, req)).rejects.toMatchObject({ code: 'ROLLBACK_FAILED' });
    expect(await journalSteps(p)).toEqual(['gating']);
  });
});

/** The journal step left by a kill at each failpoint, and the generation running once the next spcd recovered. */
const KILLED: Record<
  (typeof FAILPOINTS)[number],
  { step: UpgradeStep | null; runs: number; recovery: string }
> = {
  'upgrade.after-pull': { step: null, runs: 1, recovery: 'nothing' },
  'upgrade.after-allocate': { step: null, runs: 1, recovery: 'nothing' },
  'upgrade.after-create': { step: 'creating', runs: 1, recovery: 'undone' },
  'upgrade.after-rename': { step: 'renaming', runs: 1, recovery: 'undone' },
  'upgrade.after-stop-old': { step: 'stopping-old', runs: 1, recovery: 'undone' },
  // Started and running: recovery gates the new generation again and commits it, restarting nothing.
  'upgrade.after-start-new': { step: 'starting-new', runs: 2, recovery: 'rolledForward' },
  'upgrade.after-gate': { step: 'gating', runs: 2, recovery: 'rolledForward' },
  'upgrade.after-commit': { step: null, runs: 2, recovery: 'nothing' },
};

describe('SIGKILL at every failpoint, then journal recovery', () => {
  for (const point of FAILPOINTS) {
    const want = KILLED[point];
    it(`${point}: journal ${want.step ?? 'empty'}, recovery ${want.recovery}, generation ${want.runs} runs`, async () => {
      const { p, req } = await setup();
      p.killAt = point;
      const dying = upgradeContainer(p.deps, req).catch((e: unknown) => e);
      await waitFor('the kill', () => p.engine.killed(), { timeoutMs: 5_000, intervalMs: 1 });
      expect(p.engine.killed()).toBe(true);
      // A kill outside the rollback's try block ends the call; inside it, the dead process hangs for ever.
      const ended = await Promise.race([dying, Promise.resolve('hung')]);
      if (ended !== 'hung') expect(ended).toBeInstanceOf(Killed);
      expect(await journalSteps(p)).toEqual(want.step ? [want.step] : []);
      await expectRecovered(await p.restart(), want.recovery, want.runs);
    });
  }

  it('committing (killed while the old instance is removed): recovery finishes, generation 2 runs', async () => {
    const { p, req } = await setup();
    // finish() commits, then removes the old instance: the kill lands while that call is out.
    p.engine.fault({ kind: 'remove', nth: 1, hang: true });
    void upgradeContainer(p.deps, req);
    await waitFor('the call hangs', () => p.engine.hanging().length > 0, { timeoutMs: 5_000, intervalMs: 1 });
    p.engine.processKilled();
    expect(await journalSteps(p)).toEqual(['committing']);
    await expectRecovered(await p.restart(), 'finished', 2);
  });
});

describe('journal recovery that cannot finish or undo', () => {
  it('the old instance vanished while the process was dead: quarantined, the new one kept running under the name', async () => {
    const { p, old, req } = await setup();
    p.killAt = 'upgrade.after-stop-old';
    void upgradeContainer(p.deps, req);
    await waitFor('the kill', () => p.engine.killed(), { timeoutMs: 5_000, intervalMs: 1 });
    const next = await p.restart();
    await next.engine.remove(old.id);
    const report = await recoverJournal(next.deps);
    expect(report.quarantined.map((q) => q.container)).toEqual(['svc']);
    expect(report.quarantined[0]?.reason).toContain('ROLLBACK_FAILED');
    expect(engineView(next)).toEqual(['svc:running:g2']);
    // The entry stays for the operator.
    expect(await journalSteps(next)).toEqual(['stopping-old']);
  });
});

async function expectRecovered(next: FakeProcess, recovery: string, runs: number): Promise<void> {
  const report = await recoverJournal(next.deps);
  expect(roadOf(report)).toBe(recovery);
  expect(report.quarantined).toEqual([]);
  expect(engineView(next)).toEqual([`svc:running:g${runs}`]);
  expect(await journalSteps(next)).toEqual([]);
  // No generation stays in progress after a recovery.
  expect(next.deps.state.record('svc')?.generations.some((g) => g.outcome === 'in-progress')).toBe(false);
}
