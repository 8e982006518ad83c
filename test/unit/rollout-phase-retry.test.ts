import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { RolloutRunner } from '../../agent/rollout/runner.js';
import { FakeClock } from '../support/fake-clock.js';
import { MemoryCluster, settle } from '../support/memory-rollout-backend.js';

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
    let release!: () => void;
    let applied = 0;
    const runner = new RolloutRunner({
      node: 'compute-0',
      backend: failing,
      actions: {
        pending: () => applied === 0,
        prePull: async () => undefined,
        apply: () =>
          new Promise<void>((r) => {
            release = () => {
              applied++;
              r();
            };
          }),
        health: () => 'healthy',
      },
      clock,
      log: silentLogger(),
      defaultMaxConcurrent: 1,
      recheckMs: 1_000,
      random: () => 0.5,
      phaseSettleMs: 0,
    });
    cluster.publish({ images: { nova_compute: 'nova:30' }, globals: {}, rollout: undefined });
    await runner.start();
    await settle();
    expect(cluster.phases.get('compute-0')?.phase).toBe('upgrading');
    down = true;
    release();
    await settle();
    expect(applied).toBe(1);
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
