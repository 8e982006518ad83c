import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { RolloutRunner } from '../../agent/rollout/runner.js';
import { FakeClock } from '../support/fake-clock.js';
import { MemoryCluster, settle } from '../support/memory-rollout-backend.js';

/**
 * Phase reports are status for people: a phase that lasts less than the
 * settle time (a pull of images already present, a quick swap) is not worth
 * a write to the cluster, and a thousand nodes told at once must not write
 * a thousand `pulling` reports only to overwrite them with `queued`.
 */
function node(cluster: MemoryCluster, clock: FakeClock) {
  let finish!: () => void;
  let applied = 0;
  const runner = new RolloutRunner({
    node: 'compute-0',
    backend: cluster.backend('compute-0'),
    actions: {
      pending: () => applied === 0,
      prePull: async () => undefined,
      apply: () =>
        new Promise<void>((r) => {
          finish = () => {
            applied++;
            r();
          };
        }),
      health: () => 'healthy',
    },
    clock,
    log: silentLogger(),
    defaultMaxConcurrent: 1,
    phaseSettleMs: 300,
    random: () => 0.5,
  });
  return { runner, finish: () => finish() };
}

describe('RolloutRunner phase settle', () => {
  it('phases shorter than the settle time cost no write; a lasting one is written once it has settled', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const n = node(cluster, clock);
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
    const n = node(cluster, clock);
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
