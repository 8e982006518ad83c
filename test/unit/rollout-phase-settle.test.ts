import { describe, expect, it } from 'vitest';
import { FakeClock } from '../support/fake-clock.js';
import { MemoryCluster, settle } from '../support/memory-rollout-backend.js';
import { oneNodeRunner } from '../support/one-node-runner.js';

/**
 * Phase reports are status for people: a phase that lasts less than the
 * settle time (a pull of images already present, a quick swap) is not worth
 * a write to the cluster, and a thousand nodes told at once must not write
 * a thousand `pulling` reports only to overwrite them with `queued`.
 */
describe('RolloutRunner phase settle', () => {
  it('phases shorter than the settle time cost no write; a lasting one is written once it has settled', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const n = oneNodeRunner(cluster.backend('compute-0'), clock, { phaseSettleMs: 300 });
    cluster.publish({ images: { nova_compute: 'nova:30' }, globals: {}, rollout: undefined });
    await n.runner.start();
    await settle();
    // pulling, queued and upgrading were all reached at once: nothing written yet
    expect(cluster.history).toEqual([]);
    clock.advance(299);
    await settle();
    expect(cluster.history).toEqual([]);
    clock.advance(1);
    await settle();
    expect(cluster.history.map((h) => h.phase)).toEqual(['upgrading']);
    n.finish();
    await settle();
    // the run's end writes its last phase at once, without waiting out the settle time
    expect(cluster.history.map((h) => h.phase)).toEqual(['upgrading', 'done']);
    await n.runner.stop();
  });

  it('a quick swap reports only its end', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const n = oneNodeRunner(cluster.backend('compute-0'), clock, { phaseSettleMs: 300 });
    cluster.publish({ images: { nova_compute: 'nova:30' }, globals: {}, rollout: undefined });
    await n.runner.start();
    await settle();
    clock.advance(100);
    n.finish();
    await settle();
    expect(cluster.history.map((h) => h.phase)).toEqual(['done']);
    clock.advance(1_000);
    await settle();
    expect(cluster.history.map((h) => h.phase)).toEqual(['done']);
    await n.runner.stop();
  });
});
