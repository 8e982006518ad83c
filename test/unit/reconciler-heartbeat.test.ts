import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { FakeProcess } from '../support/fake-executor.js';
import { fakeReconciler, run, settle } from '../support/fake-reconciler.js';

/**
 * The watchdog's heartbeat says the reconcile loop is alive: it beats while
 * the engine is away (the loop waits for it), and stops when a pass wedges.
 * A pass still listing when stop() is called shows as in flight, and stop()
 * waits for it (reconciler-shutdown.test.ts has the rest of stop()).
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
    // stop() waits for the wedged pass: let its listing answer.
    const stopped = rec.stop();
    engine.answerHung('listManaged');
    await stopped;
    expect(beats).toBe(wedgedAt);
  });

  it('shows a pass still listing as in flight, and stop() resolves only once the listing answered', async () => {
    p = await FakeProcess.create();
    const { rec } = fakeReconciler(p);
    const { engine, clock } = p;
    await rec.start([]);
    expect(rec.passInFlight()).toBe(false);
    engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    rec.trigger();
    await run(clock, 1_000);
    expect(engine.hanging()).toEqual(['listManaged']);
    expect(rec.passInFlight()).toBe(true);
    let stopped = false;
    const stopping = rec.stop().then(() => (stopped = true));
    await settle();
    expect([rec.state, rec.passInFlight(), stopped]).toEqual(['stopping', true, false]);
    engine.answerHung('listManaged');
    await stopping;
    expect([rec.state, rec.passInFlight()]).toEqual(['stopped', false]);
  });
});
