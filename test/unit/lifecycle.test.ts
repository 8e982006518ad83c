import { describe, expect, it } from 'vitest';
import { createLogger } from '../../agent/log.js';
import { Components, type Component } from '../../agent/daemon/lifecycle.js';

const log = createLogger({ level: 'silent' });

/** A component that records its calls; its start fails or waits when told. */
function part(
  name: string,
  calls: string[],
  opts: { fail?: boolean; waitUntilInterrupted?: boolean } = {},
): Component {
  let interrupted: (() => void) | undefined;
  return {
    name,
    start: async () => {
      calls.push(`start ${name}`);
      if (opts.waitUntilInterrupted) await new Promise<void>((r) => (interrupted = r));
      if (opts.fail || opts.waitUntilInterrupted) throw new Error(`${name} failed`);
    },
    stop: async () => {
      calls.push(`stop ${name}`);
    },
    interrupt: () => {
      calls.push(`interrupt ${name}`);
      interrupted?.();
    },
  };
}

describe('Components', () => {
  it('starts in order and stops newest first', async () => {
    const calls: string[] = [];
    const c = new Components([part('a', calls), part('b', calls)], log);
    expect(await c.start()).toEqual({ kind: 'started' });
    await c.stop();
    await c.stop();
    expect(calls).toEqual(['start a', 'start b', 'stop b', 'stop a']);
  });

  it('a failure part way closes what was opened, the failed one included, and starts nothing after', async () => {
    const calls: string[] = [];
    const c = new Components([part('a', calls), part('b', calls, { fail: true }), part('c', calls)], log);
    const out = await c.start();
    expect(out).toMatchObject({ kind: 'failed', component: 'b' });
    expect(calls).toEqual(['start a', 'start b', 'stop b', 'stop a']);
  });

  it('a stop while a start waits interrupts it, waits for it, and closes everything opened', async () => {
    const calls: string[] = [];
    const c = new Components(
      [part('a', calls), part('b', calls, { waitUntilInterrupted: true }), part('c', calls)],
      log,
    );
    const started = c.start();
    await new Promise((r) => setImmediate(r));
    await c.stop();
    expect(await started).toEqual({ kind: 'stopped' });
    expect(calls).toEqual(['start a', 'start b', 'interrupt b', 'stop b', 'stop a']);
  });

  it('a failure at each position closes exactly the components opened, the failed one included, newest first', async () => {
    const names = ['a', 'b', 'c', 'd'];
    for (let at = 0; at < names.length; at++) {
      const calls: string[] = [];
      const c = new Components(
        names.map((n, i) => part(n, calls, { fail: i === at })),
        log,
      );
      expect(await c.start()).toMatchObject({ kind: 'failed', component: names[at] });
      const opened = names.slice(0, at + 1);
      expect(calls).toEqual([
        ...opened.map((n) => `start ${n}`),
        ...[...opened].reverse().map((n) => `stop ${n}`),
      ]);
      // Stopping again (SIGTERM after a failed start-up) closes nothing twice.
      await c.stop();
      expect(calls).toHaveLength(opened.length * 2);
    }
  });

  it('a stop that throws in the middle: the older components still close, in order', async () => {
    const calls: string[] = [];
    const bad: Component = {
      name: 'bad',
      start: async () => undefined,
      stop: async () => {
        calls.push('stop bad');
        throw new Error('x');
      },
    };
    const c = new Components([part('a', calls), part('b', calls), bad, part('c', calls)], log);
    expect(await c.start()).toEqual({ kind: 'started' });
    await c.stop();
    expect(calls).toEqual(['start a', 'start b', 'start c', 'stop c', 'stop bad', 'stop b', 'stop a']);
  });

  it('stopping drains every opened component at once, before the first stop is awaited', async () => {
    const calls: string[] = [];
    let releaseB: (() => void) | undefined;
    const drained = (name: string, slowStop = false): Component => ({
      name,
      start: async () => undefined,
      stop: async () => {
        calls.push(`stop ${name}`);
        if (slowStop) await new Promise<void>((r) => (releaseB = r));
      },
      drain: () => calls.push(`drain ${name}`),
    });
    const c = new Components([drained('a'), part('x', calls), drained('b', true)], log);
    await c.start();
    const stopped = c.stop();
    await new Promise((r) => setImmediate(r));
    // b's stop waits; a was drained already (its stop comes only after b's).
    expect(calls).toEqual(['start x', 'drain b', 'drain a', 'stop b']);
    releaseB?.();
    await stopped;
    expect(calls).toEqual(['start x', 'drain b', 'drain a', 'stop b', 'stop x', 'stop a']);
  });

  it('a stop that throws does not keep the others open', async () => {
    const calls: string[] = [];
    const bad: Component = {
      name: 'bad',
      start: async () => undefined,
      stop: () => Promise.reject(new Error('x')),
    };
    const c = new Components([part('a', calls), bad], log);
    await c.start();
    await c.stop();
    expect(calls).toEqual(['start a', 'stop a']);
  });
});
