import { afterEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import type { CallOptions } from '../../agent/engine/types.js';
import { restartContainer, resumeContainer, stopContainer } from '../../agent/executor/simple.js';
import { DEFAULT_BACKOFF } from '../../agent/model/backoff.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { ContainerLedger } from '../../agent/reconciler/ledger.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeEngine } from '../support/fake-engine.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired, settle } from '../support/fake-reconciler.js';
import { BY_HEAL, byOperator } from '../support/planner.js';
import { containerSpec } from '../support/spec.js';
import { stepRunner } from '../support/steps.js';

/**
 * The executor's one place that stops and starts a container it keeps
 * (agent/executor/simple.ts: stopContainer, resumeContainer, and
 * restartContainer over them), and the steps that use it: an operator's stop
 * and start, a check's action stop. Fakes at the engine boundary, fake clock.
 */
const SVC = containerSpec('svc', { image: 'img:1', stopGraceMs: 7_000 });

/** The fake engine, also keeping the grace each stop asked for. */
class GraceEngine extends FakeEngine {
  readonly graces: number[] = [];

  override async stop(id: string, graceMs: number, o?: CallOptions): Promise<void> {
    this.graces.push(graceMs);
    await super.stop(id, graceMs, o);
  }
}

let proc: FakeProcess | undefined;
afterEach(async () => {
  proc?.engine.answerHung();
  await proc?.close();
  proc = undefined;
});

async function setup(): Promise<{ p: FakeProcess; engine: GraceEngine; svc: ObservedContainer }> {
  const clock = new FakeClock();
  const engine = new GraceEngine(clock);
  const p = await FakeProcess.create(engine, clock);
  proc = p;
  const svc = await p.first(SVC);
  return { p, engine, svc };
}

const inspect = async (p: FakeProcess, id: string): Promise<ObservedContainer> => {
  const o = await p.engine.inspect(id);
  if (!o) throw new Error(`${id} is gone`);
  return o;
};

describe('stopContainer', () => {
  it("stops it within the container's own grace and answers when the stop began", async () => {
    const { p, engine, svc } = await setup();
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const began = p.clock.now();
    const stopping = stopContainer(p.deps, svc, SVC.stopGraceMs);
    await settle();
    expect(p.engine.hanging()).toEqual(['stop']);
    p.clock.advance(2_500);
    p.engine.answerHung('stop');
    expect(await stopping).toEqual({ stoppedAt: began });
    expect(engine.graces).toEqual([7_000]);
    expect(p.engine.byName('svc')?.state).toBe('exited');
  });

  it("passes the engine's typed error on: a stop past its deadline, a container gone", async () => {
    const { p, svc } = await setup();
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const stopping = stopContainer(p.deps, svc, SVC.stopGraceMs).catch((e: unknown) => e);
    await settle();
    p.engine.releaseHung('stop');
    expect(isSpcdError(await stopping, 'ENGINE_TIMEOUT')).toBe(true);
    expect(p.engine.byName('svc')?.state).toBe('running');
    await p.engine.remove(svc.id);
    const gone = await stopContainer(p.deps, svc, SVC.stopGraceMs).catch((e: unknown) => e);
    expect(isSpcdError(gone, 'ENGINE_NOT_FOUND')).toBe(true);
  });
});

describe('resumeContainer', () => {
  it('starts a stopped container and leaves a running one alone, publishing nothing', async () => {
    const { p, svc } = await setup();
    const startsBefore = p.engine.count('start');
    await resumeContainer(p.deps, svc);
    expect(p.engine.count('start')).toBe(startsBefore);
    await p.engine.stop(svc.id, 0);
    const stopped = await inspect(p, svc.id);
    const published = p.events.length;
    await resumeContainer(p.deps, stopped);
    expect(p.engine.count('start')).toBe(startsBefore + 1);
    expect(p.engine.byName('svc')?.state).toBe('running');
    expect(p.events.length).toBe(published);
  });

  it("passes the engine's typed error on", async () => {
    const { p, svc } = await setup();
    await p.engine.stop(svc.id, 0);
    const stopped = await inspect(p, svc.id);
    p.engine.fault({ kind: 'start', nth: 1, hang: true });
    const starting = resumeContainer(p.deps, stopped).catch((e: unknown) => e);
    await settle();
    p.engine.releaseHung('start');
    expect(isSpcdError(await starting, 'ENGINE_TIMEOUT')).toBe(true);
  });
});

describe('restartContainer', () => {
  it('stops within the grace, starts, and times the window from the stop on the clock', async () => {
    const { p, engine, svc } = await setup();
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const began = p.clock.now();
    const restarting = restartContainer(p.deps, svc, SVC.stopGraceMs);
    await settle();
    p.clock.advance(1_200);
    p.engine.answerHung('stop');
    expect(await restarting).toEqual({ stoppedAt: began, windowMs: 1_200 });
    expect(engine.graces).toEqual([7_000]);
    expect(p.engine.byName('svc')?.state).toBe('running');
  });
});

describe('the steps that stop and start through it', () => {
  const stepper = (p: FakeProcess, ledger: ContainerLedger) => stepRunner(ledger, p.deps);
  const op = { id: 'op', kind: 'stop' } as const;

  it("an operator's stop of a stopped container and start of a running one call no engine", async () => {
    const { p, engine, svc } = await setup();
    const step = stepper(p, new ContainerLedger(DEFAULT_BACKOFF));
    const d = desired(SVC);
    await step({ kind: 'start', desired: d, observed: svc, reason: 'r', origin: byOperator(op) });
    expect(p.engine.count('start')).toBe(1);
    await step({ kind: 'stop', desired: d, observed: svc, reason: 'r', origin: byOperator(op) });
    expect(engine.graces).toEqual([7_000]);
    const stopped = await inspect(p, svc.id);
    await step({ kind: 'stop', desired: d, observed: stopped, reason: 'r', origin: byOperator(op) });
    expect(engine.graces).toEqual([7_000]);
    await step({ kind: 'start', desired: d, observed: stopped, reason: 'r', origin: byOperator(op) });
    expect([p.engine.count('start'), p.engine.byName('svc')?.state]).toEqual([2, 'running']);
  });

  it("a check's stop leaves it failed, the event dated when the stop began", async () => {
    const { p, engine, svc } = await setup();
    const ledger = new ContainerLedger(DEFAULT_BACKOFF);
    ledger.unhealthy('svc', 'stop', 'probe failed', 'check probe failed 3 times', p.clock.now());
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const began = p.clock.now();
    const stopping = stepper(
      p,
      ledger,
    )({
      kind: 'stop',
      desired: desired(SVC),
      observed: svc,
      reason: 'heal',
      origin: BY_HEAL,
    });
    await settle();
    p.clock.advance(3_000);
    p.engine.answerHung('stop');
    await stopping;
    expect(engine.graces).toEqual([7_000]);
    const failed = p.events.filter((e) => e.type === 'state' && e.to === 'failed');
    expect(failed).toMatchObject([{ container: 'svc', at: began, from: 'running' }]);
  });
});
