import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { FakeClock } from '../support/fake-clock.js';
import { MemoryCluster, settle } from '../support/memory-rollout-backend.js';
import { oneNodeRunner } from '../support/one-node-runner.js';

/**
 * A node that finishes while the cluster does not answer (etcd without
 * quorum, an API server down) must still report `done` once it answers again,
 * or the fleet's status shows it upgrading for ever.
 */
describe('RolloutRunner phase reports', () => {
  it('a report that failed is written again later, and the newest one wins', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const backend = cluster.backend('compute-0');
    let down = false;
    const failing = {
      ...backend,
      writePhase: async (r: Parameters<typeof backend.writePhase>[0]) => {
        if (down) throw new SpcdError('ETCD_UNAVAILABLE', 'no quorum');
        await backend.writePhase(r);
      },
    };
    const { runner, finish, applied } = oneNodeRunner(failing, clock, { recheckMs: 1_000, phaseSettleMs: 0 });
    cluster.publish({ images: { nova_compute: 'nova:30' }, globals: {}, rollout: undefined });
    await runner.start();
    await settle();
    expect(cluster.phases.get('compute-0')?.phase).toBe('upgrading');
    down = true;
    finish();
    await settle();
    expect(applied()).toBe(1);
    expect(cluster.phases.get('compute-0')?.phase).toBe('upgrading');
    clock.advance(5_000); // still down: tried again, failed again
    await settle();
    expect(cluster.phases.get('compute-0')?.phase).toBe('upgrading');
    down = false;
    clock.advance(5_000);
    await settle();
    expect(cluster.phases.get('compute-0')?.phase).toBe('done');
    await runner.stop();
  });
});
