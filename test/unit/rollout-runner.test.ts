import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { RolloutRunner, type RolloutActions } from '../../agent/rollout/runner.js';
import { FakeClock } from '../support/fake-clock.js';
import { MemoryCluster, settle } from '../support/memory-rollout-backend.js';

/**
 * The node's driver over an in-memory backend and the fake clock: which
 * nodes start, which are held and why, and that a node that cannot pull
 * never queues.
 */
const IMAGES = { nova_compute: 'nova:30' };
const MIN = 60_000;

interface Node {
  readonly name: string;
  readonly runner: RolloutRunner;
  applied: number;
  pulls: number;
  healthy: boolean;
}

let runners: RolloutRunner[] = [];
afterEach(async () => {
  await Promise.all(runners.map((r) => r.stop()));
  runners = [];
});

function fleet(
  cluster: MemoryCluster,
  clock: FakeClock,
  count: number,
  behave: { apply?: (n: Node) => Promise<void>; prePull?: (n: Node) => Promise<void> } = {},
): Node[] {
  return Array.from({ length: count }, (_, i) => {
    const name = `compute-${String(i).padStart(2, '0')}`;
    const node = { name, applied: 0, pulls: 0, healthy: true } as Node;
    const actions: RolloutActions = {
      pending: () => node.applied === 0,
      prePull: async () => {
        node.pulls++;
        await behave.prePull?.(node);
      },
      apply: async () => {
        node.applied++;
        await behave.apply?.(node);
      },
      health: () => (node.healthy ? 'healthy' : 'unhealthy'),
    };
    (node as { runner: RolloutRunner }).runner = new RolloutRunner({
      node: name,
      backend: cluster.backend(name),
      actions,
      clock,
      log: silentLogger(),
      defaultMaxConcurrent: 2,
      random: () => 0.5,
      phaseSettleMs: 0, // decisions under test: every report written at once
    });
    runners.push(node.runner);
    return node;
  });
}

async function startAll(nodes: Node[]): Promise<void> {
  for (const n of nodes) await n.runner.start();
  await settle();
}

const badImage = async (): Promise<void> => {
  throw new SpcdError('UPGRADE_FAILED', 'health gate failed; rolled back');
};

describe('RolloutRunner', () => {
  it('a bad image stops after the canary: the other nodes never start it', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 8, { apply: badImage });
    cluster.publish({
      images: IMAGES,
      globals: {},
      rollout: { maxConcurrent: 3, canary: { nodes: 1, soak: '10m' } },
    });
    await startAll(nodes);
    for (let i = 0; i < 5; i++) {
      clock.advance(MIN);
      await settle();
    }
    expect(nodes.filter((n) => n.applied > 0)).toHaveLength(1);
    expect(cluster.ledger?.failed).toHaveLength(1);
    expect(cluster.reached('rolled-back')).toHaveLength(1);
    const held = [...cluster.phases.values()].filter((p) => p.phase === 'held');
    expect(held).toHaveLength(7);
    expect(held.every((p) => p.reason === 'canary-failed')).toBe(true);
  });

  it('without a canary, stops after K failures; with N = 1 exactly K nodes start', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 10, { apply: badImage });
    cluster.publish({
      images: IMAGES,
      globals: {},
      rollout: { maxConcurrent: 1, failureBudget: { maxFailed: 3 } },
    });
    await startAll(nodes);
    for (let i = 0; i < 5; i++) {
      clock.advance(MIN);
      await settle();
    }
    expect(nodes.filter((n) => n.applied > 0)).toHaveLength(3);
    expect(cluster.ledger?.failed).toHaveLength(3);
    expect([...cluster.phases.values()].filter((p) => p.reason === 'budget-exhausted')).toHaveLength(7);
  });

  it('with N in flight, the budget overshoots by at most N - 1', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 20, { apply: badImage });
    cluster.publish({
      images: IMAGES,
      globals: {},
      rollout: { maxConcurrent: 4, failureBudget: { maxFailed: 2 } },
    });
    await startAll(nodes);
    clock.advance(MIN);
    await settle();
    const started = nodes.filter((n) => n.applied > 0).length;
    expect(started).toBeGreaterThanOrEqual(2);
    expect(started).toBeLessThanOrEqual(2 + 4 - 1);
    expect(cluster.maxInSlot).toBeLessThanOrEqual(4);
  });

  it('canaries soak with their health watched before the rest start; an unhealthy canary halts', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 6);
    cluster.publish({
      images: IMAGES,
      globals: {},
      rollout: { maxConcurrent: 2, canary: { nodes: 2, soak: '10m' } },
    });
    await startAll(nodes);
    const canaries = nodes.filter((n) => n.applied > 0);
    expect(canaries).toHaveLength(2);
    expect(canaries.map((n) => cluster.phases.get(n.name)?.phase)).toEqual(['soaking', 'soaking']);
    clock.advance(9 * MIN);
    await settle();
    expect(nodes.filter((n) => n.applied > 0)).toHaveLength(2);
    clock.advance(MIN + 1);
    await settle();
    clock.advance(MIN);
    await settle();
    expect(cluster.ledger?.canaries).toEqual(Object.fromEntries(canaries.map((n) => [n.name, 'passed'])));
    expect(nodes.every((n) => n.applied === 1)).toBe(true);
    expect([...cluster.phases.values()].every((p) => p.phase === 'done')).toBe(true);

    // the next rollout: one canary turns unhealthy in its soak
    const cluster2 = new MemoryCluster();
    const nodes2 = fleet(cluster2, clock, 4);
    cluster2.publish({
      images: IMAGES,
      globals: {},
      rollout: { maxConcurrent: 2, canary: { nodes: 1, soak: '10m' } },
    });
    await startAll(nodes2);
    const canary = nodes2.find((n) => n.applied > 0)!;
    canary.healthy = false;
    clock.advance(MIN);
    await settle();
    clock.advance(MIN);
    await settle();
    expect(cluster2.phases.get(canary.name)).toMatchObject({ phase: 'failed', reason: 'canary-unhealthy' });
    expect(nodes2.filter((n) => n.applied > 0)).toEqual([canary]);
    expect(cluster2.ledger?.failed).toEqual([canary.name]);
  });

  it('pause holds every node out; resume lets them go, with the same rollout', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 5);
    const rollout = { id: 'nova-30', maxConcurrent: 2, paused: true };
    cluster.publish({ images: IMAGES, globals: {}, rollout });
    await startAll(nodes);
    clock.advance(MIN);
    await settle();
    expect(nodes.every((n) => n.applied === 0)).toBe(true);
    expect([...cluster.phases.values()].map((p) => p.phase)).toEqual(Array(5).fill('paused'));
    expect(cluster.slotTakes).toBe(0);
    cluster.publish({ images: IMAGES, globals: {}, rollout: { ...rollout, paused: false } });
    await settle();
    expect(nodes.every((n) => n.applied === 1)).toBe(true);
    expect(nodes.every((n) => n.pulls === 1)).toBe(true); // the images were pulled once, before the pause
    expect(cluster.maxInSlot).toBeLessThanOrEqual(2);
    expect([...cluster.phases.values()].every((p) => p.phase === 'done' && p.rollout === 'nova-30')).toBe(
      true,
    );
  });

  it('a maintenance window holds nodes out until it opens', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock(Date.parse('2026-11-24T20:00:00Z'));
    const nodes = fleet(cluster, clock, 3);
    cluster.publish({
      images: IMAGES,
      globals: {},
      rollout: { windows: [{ cron: '0 22 * * *', duration: '2h' }] },
    });
    await startAll(nodes);
    expect([...cluster.phases.values()].map((p) => p.reason)).toEqual(Array(3).fill('window-closed'));
    for (let i = 0; i < 119; i++) {
      clock.advance(MIN);
      await settle(5);
    }
    expect(nodes.every((n) => n.applied === 0)).toBe(true);
    clock.advance(2 * MIN);
    await settle();
    expect(nodes.every((n) => n.applied === 1)).toBe(true);
  });

  it('a node that cannot pull stays out of the queue, retrying with backoff, and queues once the pull works', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    let registryUp = false;
    const [node] = fleet(cluster, clock, 1, {
      prePull: async () => {
        if (!registryUp) throw new SpcdError('IMAGE_PULL_FAILED', 'registry refused');
      },
    });
    cluster.publish({ images: IMAGES, globals: {}, rollout: undefined });
    await startAll([node!]);
    expect(cluster.phases.get(node!.name)).toMatchObject({
      phase: 'pull-failed',
      reason: 'IMAGE_PULL_FAILED',
    });
    expect(node!.pulls).toBe(1);
    clock.advance(10_000 - 1);
    await settle();
    expect(node!.pulls).toBe(1);
    clock.advance(1);
    await settle();
    expect(node!.pulls).toBe(2); // after 10 s
    clock.advance(20_000);
    await settle();
    expect(node!.pulls).toBe(3); // then 20 s
    expect(cluster.slotTakes).toBe(0);
    expect(cluster.history.map((h) => h.phase)).not.toContain('queued');
    registryUp = true;
    clock.advance(40_000);
    await settle();
    expect(node!.pulls).toBe(4);
    expect(cluster.slotTakes).toBe(1);
    expect(cluster.history.map((h) => h.phase).slice(-3)).toEqual(['queued', 'upgrading', 'done']);
  });

  it('a new target supersedes a node still held for the old one', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const [node] = fleet(cluster, clock, 1);
    cluster.publish({ images: IMAGES, globals: {}, rollout: { id: 'old', paused: true } });
    await startAll([node!]);
    expect(cluster.phases.get(node!.name)).toMatchObject({ rollout: 'old', phase: 'paused' });
    cluster.publish({ images: { nova_compute: 'nova:31' }, globals: {}, rollout: { id: 'new' } });
    await settle();
    expect(cluster.phases.get(node!.name)).toMatchObject({ rollout: 'new', phase: 'done' });
    expect(node!.applied).toBe(1);
  });

  it('an invalid rollout object is ignored: nothing starts', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const [node] = fleet(cluster, clock, 1);
    cluster.publish({ images: IMAGES, globals: {}, rollout: { maxConcurrent: 'ten' } });
    await startAll([node!]);
    expect(node!.pulls).toBe(0);
    expect(cluster.phases.size).toBe(0);
  });
});

describe('RolloutRunner after a restart', () => {
  it('a canary restarted mid-soak soaks again and passes: the fleet does not wait forever', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const nodes = fleet(cluster, clock, 3);
    cluster.publish({ images: IMAGES, globals: {}, rollout: { id: 'r', canary: { nodes: 1, soak: '10m' } } });
    await startAll(nodes);
    const canary = nodes.find((n) => n.applied > 0)!;
    expect(cluster.ledger?.canaries).toEqual({ [canary.name]: 'soaking' });
    // spcd restarts on the canary: a new runner, its containers already upgraded
    await canary.runner.stop();
    const again = new RolloutRunner({
      node: canary.name,
      backend: cluster.backend(canary.name),
      actions: {
        pending: () => false,
        prePull: async () => undefined,
        apply: async () => undefined,
        health: () => 'healthy',
      },
      clock,
      log: silentLogger(),
      defaultMaxConcurrent: 2,
      random: () => 0.5,
      phaseSettleMs: 0, // decisions under test: every report written at once
    });
    runners.push(again);
    await again.start();
    await settle();
    expect(cluster.phases.get(canary.name)?.phase).toBe('soaking');
    clock.advance(10 * MIN);
    await settle();
    clock.advance(MIN);
    await settle();
    expect(cluster.ledger?.canaries).toEqual({ [canary.name]: 'passed' });
    expect(nodes.every((n) => n.applied === 1)).toBe(true);
  });
});

describe('RolloutRunner: the same id with another target', () => {
  it('a node that finished runs again when the images change under the same id', async () => {
    const cluster = new MemoryCluster();
    const clock = new FakeClock();
    const [node] = fleet(cluster, clock, 1);
    let images: Record<string, string> = IMAGES;
    (node as { runner: RolloutRunner }).runner = new RolloutRunner({
      node: node!.name,
      backend: cluster.backend(node!.name),
      actions: {
        pending: (d) => d.images.nova_compute !== images.nova_compute || node!.applied === 0,
        prePull: async () => undefined,
        apply: async (d) => {
          node!.applied++;
          images = { ...d.images };
        },
        health: () => 'healthy',
      },
      clock,
      log: silentLogger(),
      defaultMaxConcurrent: 2,
    });
    runners.push(node!.runner);
    cluster.publish({ images: { nova_compute: 'nova:30' }, globals: {}, rollout: { id: 'nova' } });
    await startAll([node!]);
    expect(cluster.phases.get(node!.name)).toMatchObject({ rollout: 'nova', phase: 'done' });
    cluster.publish({ images: { nova_compute: 'nova:31' }, globals: {}, rollout: { id: 'nova' } });
    await settle();
    expect(node!.applied).toBe(2);
    expect(images).toEqual({ nova_compute: 'nova:31' });
  });
});
