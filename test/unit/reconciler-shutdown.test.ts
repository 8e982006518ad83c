import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { STOP_DEADLINE_MS } from '../../agent/reconciler/shutdown.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired, fakeReconciler, run, until } from '../support/fake-reconciler.js';
import { containerSpec } from '../support/spec.js';

/**
 * Reconciler.stop() (docs/decisions/0030-reconciler-shutdown.md): no new pass;
 * the pass in flight begins no more steps and says how many it leaves (never
 * "step failed"); the steps already running finish; stop() resolves when they
 * have, or at STOP_DEADLINE_MS, logging what still runs and killing nothing.
 * Fake engine, fake clock.
 */
type Line = { level: number; msg: string } & Record<string, unknown>;

function capture(): { log: pino.Logger; lines: Line[]; msgs: () => string[] } {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line);
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines, msgs: () => lines.map((l) => l.msg) };
}

/** Whether a promise has settled, read without waiting for it. */
function watchSettled(p: Promise<unknown>): () => boolean {
  let done = false;
  void p.finally(() => (done = true));
  return () => done;
}

const A = containerSpec('a', { image: 'img:1' });
const B = containerSpec('b', { image: 'img:1', dependsOn: ['a'] });
const INFO = 30;
const WARN = 40;

let proc: FakeProcess | undefined;
let rec: Reconciler | undefined;
afterEach(async () => {
  proc?.engine.answerHung();
  await rec?.stop();
  await proc?.close();
  proc = rec = undefined;
});

async function setup(opts: { stopDeadlineMs?: number } = {}) {
  const p = await FakeProcess.create();
  proc = p;
  p.engine.addImage('img:1');
  const c = capture();
  const r = fakeReconciler(p, { log: c.log, ...opts }).rec;
  rec = r;
  return { p, rec: r, ...c };
}

describe('Reconciler.stop()', () => {
  it('stopped during a listing: waits for the pass, which begins no step and logs one info line', async () => {
    const { p, rec, lines, msgs } = await setup();
    await rec.start([]);
    p.engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    rec.setDesired([desired(A), desired(B)]);
    await until(p.clock, 'a listing hanging', () => p.engine.hanging().includes('listManaged'));
    expect(rec.passInFlight()).toBe(true);

    const stopped = watchSettled(rec.stop());
    await run(p.clock, 5_000);
    // The pass is still listing: stop() waits for it.
    expect([stopped(), rec.state]).toEqual([false, 'stopping']);
    p.engine.answerHung('listManaged');
    await until(p.clock, 'stop() resolved', stopped);

    expect([rec.state, rec.passInFlight()]).toEqual(['stopped', false]);
    // Its step (a's create; b waits for a) was not begun, and not reported as failed.
    expect(p.engine.count('create')).toBe(0);
    expect(msgs()).not.toContain('step failed');
    const ended = lines.filter((l) => l.msg.startsWith('pass ended by shutdown'));
    expect(ended.map((l) => [l.level, l.stepsLeft, l.msg])).toEqual([
      [INFO, 1, 'pass ended by shutdown: 1 step(s) left for the next start'],
    ]);
    expect(rec.factsOf('a').lastError).toBeNull();
  });

  it('stopped during a step: the step completes, the next is not run, nothing is logged as failed', async () => {
    const { p, rec, msgs } = await setup();
    // a's create hangs in its start; b waits for a running.
    p.engine.fault({ kind: 'start', nth: 1, hang: true });
    await rec.start([desired(A), desired(B)]);
    await until(p.clock, "a's start hanging", () => p.engine.hanging().includes('start'));
    expect(rec.factsOf('a').operation?.kind).toBe('reconcile');

    const stopped = watchSettled(rec.stop());
    await run(p.clock, 5_000);
    expect(stopped()).toBe(false);
    p.engine.answerHung('start');
    await until(p.clock, 'stop() resolved', stopped);

    expect(rec.state).toBe('stopped');
    expect(p.engine.byName('a')?.state).toBe('running');
    expect(rec.factsOf('a').operation).toBeNull();
    // a's release asked for a pass (b's turn): none runs once stopping.
    await run(p.clock, 30_000);
    expect(p.engine.byName('b')).toBeUndefined();
    expect(p.engine.count('create')).toBe(1);
    expect(msgs()).not.toContain('step failed');
    expect(msgs().filter((m) => m.startsWith('shutdown deadline'))).toEqual([]);
  });

  it(`stopped while a pass hangs: resolves at the deadline (${STOP_DEADLINE_MS} ms), logs it, kills nothing`, async () => {
    const { p, rec, lines, msgs } = await setup();
    await rec.start([desired(A)]);
    await until(
      p.clock,
      'a running',
      () => p.engine.byName('a')?.state === 'running' && !rec.factsOf('a').operation,
    );
    const callsBefore = p.engine.calls.length;
    p.engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    p.engine.exit(p.engine.byName('a')?.id ?? '', 1);
    rec.trigger();
    await until(p.clock, 'a listing hanging', () => p.engine.hanging().includes('listManaged'));

    const stopped = watchSettled(rec.stop());
    await run(p.clock, STOP_DEADLINE_MS - 1_000, 1_000);
    expect(stopped()).toBe(false);
    await run(p.clock, 1_000, 1_000);
    await until(p.clock, 'stop() resolved at the deadline', stopped, { maxFakeMs: 0 });

    expect(rec.state).toBe('stopped');
    const warned = lines.filter((l) => l.msg.startsWith('shutdown deadline passed'));
    expect(warned.map((l) => [l.level, l.deadlineMs, l.passInFlight, l.containers])).toEqual([
      [WARN, STOP_DEADLINE_MS, true, []],
    ]);
    // Nothing was cancelled or killed: the listing still hangs, and no call but it was made.
    expect(p.engine.hanging()).toEqual(['listManaged']);
    expect(p.engine.calls.slice(callsBefore).map((c) => c.kind)).toEqual(['listManaged']);
    // When it answers late, the pass still begins nothing (a's restart is left for the next start).
    p.engine.answerHung('listManaged');
    await until(p.clock, 'the pass ended', () => !rec.passInFlight());
    expect(p.engine.calls.slice(callsBefore).map((c) => c.kind)).toEqual(['listManaged']);
    expect(msgs()).not.toContain('step failed');
    expect(lines.filter((l) => l.msg.startsWith('pass ended by shutdown')).map((l) => l.stepsLeft)).toEqual([
      1,
    ]);
  });
});
