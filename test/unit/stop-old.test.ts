/**
 * stopOld (agent/executor/stop-old.ts): an upgrade may start the successor of
 * a host-network container as soon as the host sees none of its processes
 * left, before the engine's stop returns; otherwise only when it returns.
 */
import { describe, expect, it } from 'vitest';
import type { ExitWatch } from '../../agent/executor/ports.js';
import { settleAll, stopOld, type StopOldDeps } from '../../agent/executor/stop-old.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { settle } from '../support/fake-reconciler.js';

const OLD = { id: 'a'.repeat(64), pid: 4242 } as ObservedContainer;

/** An engine stop the test ends, and an exit watch whose "gone" the test decides. */
function fakes(o: { visible?: boolean; gone?: 'now' | 'never' | 'unknown' } = {}) {
  let endStop!: (err?: Error) => void;
  const stopCalls: [string, number][] = [];
  const tracked: [string, number][] = [];
  let aborted = false;
  const engine = {
    stop: (id: string, graceMs: number) => {
      stopCalls.push([id, graceMs]);
      return new Promise<void>((resolve, reject) => {
        endStop = (err) => (err ? reject(err) : resolve());
      });
    },
  };
  const exits: ExitWatch = {
    track: async (id, pid) => {
      tracked.push([id, pid]);
      if (o.visible === false) return undefined;
      return {
        gone: (signal) =>
          new Promise<boolean>((resolve) => {
            if (o.gone === 'now') resolve(true);
            else if (o.gone === 'unknown') resolve(false);
            signal.addEventListener('abort', () => ((aborted = true), resolve(false)), { once: true });
          }),
      };
    },
  };
  const deps: StopOldDeps = { engine, exits };
  return { deps, stopCalls, tracked, end: (err?: Error) => endStop(err), wasAborted: () => aborted };
}

/** `p`'s value, or 'pending' if it is still pending once everything that can settle now has (the fakes are in memory). */
const settled = async <T>(p: Promise<T>): Promise<'pending' | T> =>
  Promise.race([p, settle().then(() => 'pending' as const)]);

describe('stopOld', () => {
  it('lets a host-network successor start once no process is left, while the engine still stops the old one', async () => {
    const f = fakes({ gone: 'now' });
    const r = await settled(stopOld(f.deps, OLD, 5000, true));
    expect(r).not.toBe('pending');
    expect(r).toMatchObject({ early: true });
    expect(f.stopCalls).toEqual([[OLD.id, 5000]]);
    expect(f.tracked).toEqual([[OLD.id, 4242]]);
    // The engine's stop is still the caller's to await, and its failure reaches the caller.
    const engineStop = (r as { engineStop: Promise<void> }).engineStop;
    expect(await settled(engineStop)).toBe('pending');
    f.end(new Error('engine said no'));
    await expect(engineStop).rejects.toThrow('engine said no');
  });

  it('waits for the engine for any other network, without looking at the host', async () => {
    const f = fakes({ gone: 'now' });
    const p = stopOld(f.deps, OLD, 5000, false);
    expect(await settled(p)).toBe('pending');
    expect(f.tracked).toEqual([]);
    f.end();
    expect(await p).toMatchObject({ early: false });
  });

  it('waits for the engine when the host cannot see the processes, or can no longer tell', async () => {
    for (const o of [{ visible: false }, { gone: 'unknown' as const }]) {
      const f = fakes(o);
      const p = stopOld(f.deps, OLD, 5000, true);
      expect(await settled(p)).toBe('pending');
      f.end();
      expect(await p).toMatchObject({ early: false });
    }
  });

  it('ends the watch when the engine finishes first, and passes an engine failure on', async () => {
    const f = fakes({ gone: 'never' });
    const p = stopOld(f.deps, OLD, 5000, true);
    await settled(p);
    f.end();
    expect(await p).toMatchObject({ early: false });
    expect(f.wasAborted()).toBe(true);

    const g = fakes({ gone: 'never' });
    const q = stopOld(g.deps, OLD, 5000, true);
    await settled(q);
    g.end(new Error('stop timed out'));
    await expect(q).rejects.toThrow('stop timed out');
  });
});

describe('settleAll', () => {
  it('waits for every promise before it throws the first failure', async () => {
    let slowDone = false;
    // settles only after several turns of the event loop: well after the first failure
    const slow = settle().then(() => {
      slowDone = true;
    });
    await expect(settleAll([Promise.reject(new Error('first')), slow])).rejects.toThrow('first');
    expect(slowDone).toBe(true);
  });
});
