import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { FakeProcess } from '../support/fake-executor.js';
import { fakeReconciler, run } from '../support/fake-reconciler.js';

/**
 * The watchdog's heartbeat says the reconcile loop is alive: it beats while
 * the engine is away (the loop waits for it), and stops when a pass wedges.
 */
describe('reconciler heartbeat', () => {
  let p: FakeProcess | undefined;
  afterEach(async () => {
    await p?.close();
  });

  it('beats on every pass while the engine is away, and stops when a pass wedges', async () => {
    p = await FakeProcess.create();
    let beats = 0;
    const { rec } = fakeReconciler(p, { onHeartbeat: () => beats++ });
    const { engine, clock } = p;
    await rec.start([]);
    expect(beats).toBe(1);
    engine.fault({ kind: 'listManaged', fail: new SpcdError('ENGINE_UNAVAILABLE', 'connect ENOENT') });
    await run(clock, 30_000);
    expect(rec.engineStatus().available).toBe(false);
    // One pass a second while the engine is away (ENGINE_RETRY_MS), each one a proof of life.
    expect(beats).toBeGreaterThanOrEqual(20);
    engine.clearFaults();
    engine.fault({ kind: 'listManaged', hang: true });
    await run(clock, 2_000);
    const wedgedAt = beats;
    await run(clock, 60_000);
    expect(beats).toBe(wedgedAt);
    expect(engine.hanging()).toEqual(['listManaged']);
    await rec.stop();
  });
});
