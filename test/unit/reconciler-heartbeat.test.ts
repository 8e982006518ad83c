import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import type { ContainerEngine, EventEngine } from '../../agent/engine/types.js';
import type { ExecutorDeps } from '../../agent/executor/ports.js';
import { createLogger } from '../../agent/log.js';
import { EventBus } from '../../agent/model/events.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { Reconciler, type HealthPort } from '../../agent/reconciler/reconciler.js';
import { FakeClock } from '../support/fake-clock.js';

/**
 * The watchdog's heartbeat says the reconcile loop is alive: it beats while
 * the engine is away (the loop waits for it), and stops when a pass wedges.
 */
type Mode = 'up' | 'down' | 'hang';

function setup(): { clock: FakeClock; beats: () => number; mode: (m: Mode) => void; rec: Reconciler } {
  let mode: Mode = 'up';
  let beats = 0;
  const engine: ContainerEngine & EventEngine = {
    ping: async () => undefined,
    listManaged: (): Promise<ObservedContainer[]> => {
      if (mode === 'down') return Promise.reject(new SpcdError('ENGINE_UNAVAILABLE', 'connect ENOENT'));
      if (mode === 'hang') return new Promise(() => undefined);
      return Promise.resolve([]);
    },
    subscribe: () => ({ close: () => undefined }),
  } as unknown as ContainerEngine & EventEngine;
  // Start-up's journal recovery and state check are the only users of the executor's ports here: an empty journal and state.
  const exec = {
    journal: { scan: async () => ({ entries: [], malformed: [] }) },
    engine: { listTasks: async () => [] },
    state: { names: () => [], record: () => undefined, needsRebuild: () => false },
  } as unknown as ExecutorDeps;
  const health: HealthPort = {
    watch: () => undefined,
    unwatch: () => undefined,
    update: () => undefined,
    onAction: () => () => undefined,
  };
  const clock = new FakeClock();
  const rec = new Reconciler({
    engine,
    exec,
    health,
    events: new EventBus(),
    log: createLogger({ level: 'silent' }),
    clock,
    instance: 't',
    relistMs: 10_000,
    onHeartbeat: () => {
      beats++;
    },
  });
  return { clock, beats: () => beats, mode: (m) => (mode = m), rec };
}

/** Advances the fake clock in steps, letting each pass's promises settle. */
async function run(clock: FakeClock, ms: number, step = 500): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(step);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  }
}

describe('reconciler heartbeat', () => {
  it('beats on every pass while the engine is away, and stops when a pass wedges', async () => {
    const { clock, beats, mode, rec } = setup();
    await rec.start([]);
    expect(beats()).toBe(1);
    mode('down');
    await run(clock, 30_000);
    expect(rec.engineStatus().available).toBe(false);
    // One pass a second while the engine is away (ENGINE_RETRY_MS), each one a proof of life.
    expect(beats()).toBeGreaterThanOrEqual(20);
    mode('hang');
    await run(clock, 2_000);
    const wedgedAt = beats();
    await run(clock, 60_000);
    expect(beats()).toBe(wedgedAt);
    await rec.stop();
  });
});
