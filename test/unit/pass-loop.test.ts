/**
 * PassLoop (agent/reconciler/pass-loop.ts): a scheduled pass that throws is
 * reported, never left as an unhandled rejection, and the loop goes on; a
 * timer that fires once the reconciler stopped runs no pass; busy() is true
 * exactly while a pass runs, close() or not.
 */
import { describe, expect, it } from 'vitest';
import { PassLoop } from '../../agent/reconciler/pass-loop.js';
import { FakeClock } from '../support/fake-clock.js';

const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
};

function loop(body: () => Promise<number>) {
  const clock = new FakeClock();
  const errors: unknown[] = [];
  let active = true;
  const l = new PassLoop({
    clock,
    body,
    idleMs: 1000,
    active: () => active,
    onError: (err) => errors.push(err),
  });
  return { l, clock, errors, stop: () => (active = false) };
}

describe('PassLoop', () => {
  it('reports a scheduled pass that threw, and schedules the next one', async () => {
    let calls = 0;
    const t = loop(async () => {
      calls++;
      if (calls === 1) throw new Error('health manager is closed');
      return 5000;
    });
    t.l.trigger();
    t.clock.advance(0);
    await settle();
    expect(calls).toBe(1);
    expect(t.errors.map((e) => (e as Error).message)).toEqual(['health manager is closed']);
    // the loop goes on after the idle delay
    t.clock.advance(1000);
    await settle();
    expect(calls).toBe(2);
    expect(t.errors).toHaveLength(1);
  });

  it('runs no pass from a timer that fires after the reconciler stopped', async () => {
    let calls = 0;
    const t = loop(async () => {
      calls++;
      return 1000;
    });
    await t.l.run();
    expect(calls).toBe(1);
    expect(t.clock.pending()).toBe(1);
    t.stop();
    t.clock.advance(1000);
    await settle();
    expect(calls).toBe(1);
    expect(t.errors).toEqual([]);
  });

  it('is busy while a pass runs, also one that outlives close(), and not before or after', async () => {
    let endPass!: () => void;
    const t = loop(() => new Promise<number>((r) => (endPass = () => r(1000))));
    expect(t.l.busy()).toBe(false);
    const pass = t.l.run();
    expect(t.l.busy()).toBe(true);
    t.stop();
    t.l.close();
    await settle();
    expect(t.l.busy()).toBe(true);
    endPass();
    await pass;
    expect(t.l.busy()).toBe(false);
    expect(t.clock.pending()).toBe(0);
  });
});
