import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { recoverJournal, retryQuarantined } from '../../agent/executor/recover.js';
import { upgradeContainer } from '../../agent/executor/upgrade.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { FakeProcess } from '../support/fake-executor.js';
import { killedIn, startedIn, type Left } from '../support/recovery-fixture.js';
import { amqpCheck, containerSpec } from '../support/spec.js';
import { engineView, OLD, NEXT, upgradeTo } from '../support/upgrade-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * Recovery's road for an entry whose new generation was started: rolled
 * forward (gated again with its own gate, committed, nothing restarted) when
 * that generation runs under the container's name and passes; undone as
 * before otherwise. Fake engine, fake clock, fake health gate; no sleeps.
 */
const procs: FakeProcess[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) await p.close();
});

const WITH_CHECKS: { old: ContainerSpec; next: ContainerSpec } = {
  old: { ...OLD, healthchecks: [amqpCheck('svc')] },
  next: { ...NEXT, healthchecks: [amqpCheck('svc')] },
};

const gateFails = new SpcdError('HEALTH_GATE_FAILED', 'amqp failed 3 times');

/** The engine calls the recovering process made that act on a container. */
const acts = (p: FakeProcess, from: number): string[] =>
  p.engine.calls
    .slice(from)
    .filter((c) => ['stop', 'start', 'kill', 'remove', 'rename', 'create'].includes(c.kind))
    .map((c) => c.kind);

/** The recovery's upgrade-step events, as step:outcome. */
const recoverySteps = (p: FakeProcess): string[] =>
  p.events.flatMap((e) => (e.type === 'upgrade-step' ? [`${e.step}:${e.outcome}`] : []));

async function dead(left: Left, specs = WITH_CHECKS): Promise<FakeProcess> {
  return killedIn(left, (p) => procs.push(p), specs);
}

describe('recovery rolls a started generation forward', () => {
  for (const step of ['starting-new', 'gating'] as const) {
    it(`${step}, the new one running and its gate passing: committed, nothing stopped or started`, async () => {
      const next = await dead(startedIn(step));
      const newId = next.engine.byName('svc')!.id;
      const from = next.engine.calls.length;
      const report = await recoverJournal(next.deps);
      expect(report).toMatchObject({ rolledForward: ['svc'], undone: [], finished: [], quarantined: [] });
      expect(engineView(next)).toEqual(['svc:running:g2']);
      expect(next.engine.byName('svc')!.id).toBe(newId);
      // The parked old instance is removed; the running one is neither stopped nor started.
      expect(acts(next, from)).toEqual(['remove']);
      // Its own gate: the health room watched the running instance.
      expect(next.health.watched.get('svc')).toBe(newId);
      expect(next.deps.state.generation('svc', 2)?.outcome).toBe('current');
      expect(next.deps.state.generation('svc', 1)?.outcome).toBe('superseded');
      expect(next.deps.state.record('svc')?.lastKnownGood).toBe(2);
      expect((await next.deps.journal.scan()).entries).toEqual([]);
      expect(recoverySteps(next)).toEqual(['health-gate:begin', 'health-gate:done', 'recover:done']);
      const done = next.events.find((e) => e.type === 'upgrade-step' && e.step === 'recover');
      expect(done).toMatchObject({ operationId: 'op-up', generation: 2, detail: /^rolled forward/ });
    });
  }

  it('a generation without checks passes on staying up (min-ready), as in the transaction', async () => {
    const next = await dead(startedIn('gating'), { old: OLD, next: NEXT });
    expect((await recoverJournal(next.deps)).rolledForward).toEqual(['svc']);
    expect(engineView(next)).toEqual(['svc:running:g2']);
  });

  it('its gate fails: undone, the old one back, the reason says the roll forward failed', async () => {
    const next = await dead(startedIn('gating'));
    const newId = next.engine.byName('svc')!.id;
    next.health.verdict = (_n, id) => (id === newId ? gateFails : undefined);
    const report = await recoverJournal(next.deps);
    expect(report).toMatchObject({ undone: ['svc'], rolledForward: [], quarantined: [] });
    expect(engineView(next)).toEqual(['svc:running:g1']);
    const g2 = next.deps.state.generation('svc', 2);
    expect(g2?.outcome).toBe('rolled-back');
    expect(g2?.reason).toMatch(
      /interrupted at step gating .*rolled forward, but its gate failed: amqp failed/,
    );
    expect(next.health.watched.has('svc')).toBe(false);
    expect((await next.deps.journal.scan()).entries).toEqual([]);
    expect(recoverySteps(next)).toEqual(['health-gate:begin', 'health-gate:failed', 'recover:done']);
    // As after the transaction's own failed gate: the reconciler does not retry this target.
    expect(next.deps.state.record('svc')?.failedTarget).toEqual({
      specHash: g2?.specHash,
      configHash: 'none',
      generation: 2,
    });
  });

  it('the new one does not run (exited after its start): undone without a gate', async () => {
    const next = await dead({ ...startedIn('gating'), freshRunning: false });
    const report = await recoverJournal(next.deps);
    expect(report.undone).toEqual(['svc']);
    expect(engineView(next)).toEqual(['svc:running:g1']);
    expect(next.deps.state.generation('svc', 2)?.reason).toMatch(/the new generation does not run/);
    expect(next.deps.state.record('svc')?.failedTarget).toBeUndefined();
    expect(next.health.watched.size).toBe(0);
    expect(recoverySteps(next)).toEqual(['recover:done']);
  });

  for (const step of ['creating', 'renaming', 'stopping-old'] as const) {
    it(`${step}: always undone, even with the new one running under the name`, async () => {
      const next = await dead(startedIn(step));
      expect((await recoverJournal(next.deps)).undone).toEqual(['svc']);
      expect(engineView(next)).toEqual(['svc:running:g1']);
      expect(next.deps.state.generation('svc', 2)?.reason).toMatch(/not started yet/);
      expect(next.health.watched.size).toBe(0);
    });
  }

  it('a recovery killed inside its own gate: the next one undoes instead of gating for ever', async () => {
    const second = await dead(startedIn('gating'));
    second.health.verdict = () => {
      second.engine.processKilled();
      return undefined;
    };
    void recoverJournal(second.deps);
    await waitFor('the kill', () => second.engine.killed(), { timeoutMs: 5_000, intervalMs: 1 });
    const entry = await second.deps.journal.read('svc');
    expect(entry).toMatchObject({ step: 'gating', mustUndo: /a recovery's gate began at/ });
    const third = await second.restart();
    expect((await recoverJournal(third.deps)).undone).toEqual(['svc']);
    expect(engineView(third)).toEqual(['svc:running:g1']);
  });

  it('a gate ended by spcd stopping is no verdict: nothing undone, the entry back as it was', async () => {
    const next = await dead(startedIn('starting-new'));
    next.health.verdict = () => new SpcdError('SHUTTING_DOWN', 'health manager is closing');
    const report = await recoverJournal(next.deps);
    expect(report.quarantined.map((q) => q.reason)).toEqual([expect.stringMatching(/SHUTTING_DOWN/)]);
    expect(engineView(next)).toEqual(['svc.g1.old:exited:g1', 'svc:running:g2']);
    const entry = await next.deps.journal.read('svc');
    expect(entry?.step).toBe('starting-new');
    expect(entry?.mustUndo).toBeUndefined();
    // The next start gates it again.
    next.health.verdict = () => undefined;
    expect((await recoverJournal(next.deps)).rolledForward).toEqual(['svc']);
  });

  it('a quarantine retry takes the same road: cleared by rolling forward', async () => {
    const next = await dead(startedIn('starting-new'));
    expect(await retryQuarantined(next.deps, 'svc')).toBe('cleared');
    expect(engineView(next)).toEqual(['svc:running:g2']);
  });
});

describe('an entry whose gate already failed is never rolled forward', () => {
  it('killed inside the transaction rollback: the entry is undo-only, recovery undoes though the new one runs', async () => {
    const p = await FakeProcess.create();
    procs.push(p);
    const old = await p.first(OLD);
    p.engine.addImage(NEXT.image);
    p.health.verdict = (_n, id) => (id !== old.id ? gateFails : undefined);
    // Stop 1 is the old one's; stop 2, the rollback's stop of the new one, hangs: then spcd dies.
    p.engine.fault({ kind: 'stop', nth: 2, hang: true });
    void upgradeContainer(p.deps, { ...upgradeTo(old), spec: WITH_CHECKS.next });
    await waitFor('the rollback hangs', () => p.engine.hanging().length > 0, {
      timeoutMs: 5_000,
      intervalMs: 1,
    });
    p.engine.processKilled();
    const entry = await p.deps.journal.read('svc');
    expect(entry).toMatchObject({ step: 'gating', mustUndo: /rolled back: amqp failed/ });
    const next = await p.restart();
    expect((await recoverJournal(next.deps)).undone).toEqual(['svc']);
    expect(engineView(next)).toEqual(['svc:running:g1']);
    expect(next.deps.state.generation('svc', 2)?.reason).toMatch(/rolled back: amqp failed/);
  });
});

describe('a hypervisor', () => {
  const libvirt = (image: string): ContainerSpec =>
    containerSpec('svc', {
      image,
      role: 'hypervisor',
      network: 'host',
      pid: 'host',
      stopGraceMs: 30_000,
      healthchecks: [amqpCheck('libvirtd')],
    });
  const specs = { old: libvirt('nova-libvirt:1'), next: libvirt('nova-libvirt:2') };

  it('started libvirt that passes its gate: rolled forward, libvirt neither stopped nor started again', async () => {
    const next = await dead(startedIn('gating'), specs);
    const newId = next.engine.byName('svc')!.id;
    const from = next.engine.calls.length;
    const stops = next.engine.stopGraces.length;
    expect((await recoverJournal(next.deps)).rolledForward).toEqual(['svc']);
    expect(next.engine.byName('svc')).toMatchObject({ id: newId, state: 'running' });
    expect(acts(next, from)).toEqual(['remove']);
    expect(next.engine.stopGraces.slice(stops)).toEqual([]);
  });

  it('started libvirt that fails its gate: undone as before, the new one stopped with its own grace', async () => {
    const next = await dead(startedIn('gating'), specs);
    const newId = next.engine.byName('svc')!.id;
    next.health.verdict = (_n, id) => (id === newId ? gateFails : undefined);
    const stops = next.engine.stopGraces.length;
    expect((await recoverJournal(next.deps)).undone).toEqual(['svc']);
    expect(engineView(next)).toEqual(['svc:running:g1']);
    expect(next.engine.stopGraces.slice(stops)).toEqual([{ id: newId, graceMs: 30_000 }]);
  });
});

describe("an operator's change committed by recovery keeps its pin", () => {
  const pin = { definitionHash: 'defs-at-the-request' };

  it('rolled forward: the generation it committed is pinned over the definitions', async () => {
    const next = await dead({ ...startedIn('gating'), pin });
    expect((await recoverJournal(next.deps)).rolledForward).toEqual(['svc']);
    expect(next.deps.state.record('svc')?.pin).toEqual({
      spec: WITH_CHECKS.next,
      definitionHash: pin.definitionHash,
    });
  });

  it("'clear': a change that matches the definitions drops an earlier pin at its commit", async () => {
    const next = await dead({ ...startedIn('gating'), pin: 'clear' });
    await next.deps.state.setPin('svc', { spec: WITH_CHECKS.old, definitionHash: 'older' });
    expect((await recoverJournal(next.deps)).rolledForward).toEqual(['svc']);
    expect(next.deps.state.record('svc')?.pin).toBeUndefined();
  });

  it('undone: the pin is what it was before the change', async () => {
    const next = await dead({ ...startedIn('gating'), pin });
    const earlier = { spec: WITH_CHECKS.old, definitionHash: 'older' };
    await next.deps.state.setPin('svc', earlier);
    const newId = next.engine.byName('svc')!.id;
    next.health.verdict = (_n, id) => (id === newId ? gateFails : undefined);
    expect((await recoverJournal(next.deps)).undone).toEqual(['svc']);
    expect(next.deps.state.record('svc')?.pin).toEqual(earlier);
  });

  it('the transaction itself pins at its commit, not after it', async () => {
    const p = await FakeProcess.create();
    procs.push(p);
    const current = await p.first(OLD);
    p.engine.addImage(NEXT.image);
    await upgradeContainer(p.deps, { ...upgradeTo(current), pin });
    expect(p.deps.state.record('svc')?.pin).toEqual({ spec: NEXT, definitionHash: pin.definitionHash });
  });
});
