import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { desired, run, runningReconcilers, until } from '../support/fake-reconciler.js';
import { containerSpec } from '../support/spec.js';

/**
 * A changed definition whose replacement keeps failing is tried again with
 * backoff (1 s, 2 s, 4 s ...), not at every pass, while the old instance runs
 * on and stays supervised; a new definition is tried at once. Fake engine,
 * fake clock.
 */
const V1 = containerSpec('svc', { image: 'img:1' });
const V2 = containerSpec('svc', { image: 'img:2' });
const V3 = containerSpec('svc', { image: 'img:3' });

const start = runningReconcilers();

describe('a replacement that fails', () => {
  it('is tried again after its backoff, the old instance supervised meanwhile', async () => {
    const { p, rec } = await start([V1], [V1.image, V2.image, V3.image]);
    const creates = (): number => p.engine.calls.filter((c) => c.kind === 'create').length;
    const before = creates();

    p.engine.fault({ kind: 'create', fail: new SpcdError('ENGINE_FAILED', 'no room') });
    rec.setDesired([desired(V2)]);
    await run(p.clock, 10_000, 100);
    // At 0, 1, 3 and 7 s: four tries in 10 s (a try at every pass made 30 here).
    expect(creates() - before).toBeGreaterThanOrEqual(3);
    expect(creates() - before).toBeLessThanOrEqual(5);
    expect(rec.primary('svc')?.state).toBe('running');
    expect(rec.primary('svc')?.identity.generation).toBe(1);
    expect(rec.preview().waiting).toContainEqual({
      container: 'svc',
      reason: expect.stringMatching(/the last try failed, tried again after its backoff/),
    });

    // Still supervised: killed, the old instance is started again.
    const old = p.engine.byName('svc')!;
    p.engine.exit(old.id, 137);
    await until(p.clock, 'the old instance started again', () => p.engine.byName('svc')?.state === 'running');

    // A new definition is tried at once, without waiting for the backoff.
    p.engine.clearFaults();
    const tries = creates();
    rec.setDesired([desired(V3)]);
    await until(p.clock, 'generation 3 running', () => rec.primary('svc')?.image === 'img:3', {
      maxFakeMs: 500,
    });
    expect(creates()).toBe(tries + 1);
  });
});
