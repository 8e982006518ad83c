import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { connectEtcd } from '../../agent/etcd/client.js';
import { SpcdError } from '../../agent/errors.js';
import { REPO } from '../support/daemon.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { EtcdFleet } from '../support/etcd-fleet.js';
import { waitFor } from '../support/wait.js';

/**
 * Fleet rollouts through a real 3-member etcd cluster (Debian's etcd-server
 * on loopback ports, started here): in-process nodes, each with its own etcd
 * client, backend and runner, and a simulated local upgrade. The faults are
 * real: members and a slot-holding node are SIGKILLed.
 */
let cluster: EtcdCluster;
const fleets: EtcdFleet[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
}, 90_000);

afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (let i = 0; i < cluster.size; i++) cluster.restart(i);
  await cluster.waitHealthy();
  await Promise.all(fleets.splice(0).map((f) => f.stop()));
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

let n = 0;
function fleet(opts: Partial<ConstructorParameters<typeof EtcdFleet>[0]> = {}): EtcdFleet {
  const f = new EtcdFleet({ endpoints: cluster.endpoints(), prefix: `/t${++n}-${process.pid}/`, ...opts });
  fleets.push(f);
  return f;
}

const names = (k: number, tag: string): string[] => Array.from({ length: k }, (_, i) => `${tag}-${i}`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Waits until every named node reports `phase` (and `reason`, when given) in
 * etcd for the target last published: a node's report of the document before
 * the test's (`done`, `up-to-date`, written at its start) does not count.
 */
async function allReport(f: EtcdFleet, nodes: string[], phase: string, reason?: string, timeoutMs = 60_000) {
  await waitFor(
    `${nodes.join(',')} ${phase}${reason ? ` (${reason})` : ''}`,
    async () => {
      const p = await f.phases();
      return nodes.every((node) => {
        const r = p.get(node);
        return (
          r !== undefined &&
          r.target === f.publishedTarget &&
          r.phase === phase &&
          (!reason || r.reason === reason)
        );
      });
    },
    { timeoutMs, intervalMs: 100 },
  ).catch(async (err: unknown) => {
    const p = [...(await f.phases()).values()].map((r) => `${r.node}:${r.phase}/${r.reason ?? ''}`);
    throw new Error(`${(err as Error).message}\nphases: ${p.join(' ')}\n${cluster.logs(3)}`);
  });
}

describe('a rollout through a real 3-member etcd cluster', () => {
  inOrder();
  it('upgrades every node, never more than maxConcurrent at once, and leaves no slot held', async () => {
    const f = fleet({ apply: () => sleep(150) });
    const nodes = names(8, 'a');
    for (const node of nodes) await f.add(node);
    await f.publish('images: { svc: "img:2" }\nrollout: { id: r-a, maxConcurrent: 3 }\n');
    await allReport(f, nodes, 'done');
    expect([...f.applied].sort()).toEqual([...nodes].sort());
    expect(f.maxInFlight).toBeLessThanOrEqual(3);
    expect(f.maxInFlight).toBeGreaterThanOrEqual(1);
    await waitFor('every slot released', async () => Object.keys(await f.slotHolders()).length === 0);
  });

  it('a long queue: waiters far back follow a key ahead, and one leaving the middle stalls nobody', async () => {
    let open!: () => void;
    const go = new Promise<void>((r) => (open = r));
    const f = fleet({ apply: () => go.then(() => sleep(20)) });
    const nodes = names(14, 'q');
    for (const node of nodes) await f.add(node);
    await f.publish('images: { svc: "img:2" }\nrollout: { id: r-q, maxConcurrent: 2 }\n');
    // N = 2, H = 2: a waiter with more than N + 2H = 6 keys ahead follows the key 2 places ahead.
    const slots = f.nodes[0]!.backend.slots;
    await waitFor('every node in the queue', async () => (await slots.queue()).length === nodes.length, {
      timeoutMs: 30_000,
    });
    await waitFor('two upgrading', () => f.started.length === 2, { timeoutMs: 30_000 });
    const queue = (await slots.queue()).map((e) => e.node);
    expect(await slots.holders(2)).toEqual(
      Object.fromEntries((await slots.queue()).slice(0, 2).map((e) => [e.key, e.node])),
    );
    expect([...f.started].sort()).toEqual(queue.slice(0, 2).sort());
    // The waiters 5th and 9th in line leave (their keys deleted): the 7th and 11th followed them.
    const leaving = [queue[5]!, queue[9]!];
    await Promise.all(f.nodes.filter((x) => leaving.includes(x.name)).map((x) => x.runner.stop()));
    await waitFor('the leavers out of the queue', async () => (await slots.queue()).length === 12);
    open();
    const staying = nodes.filter((x) => !leaving.includes(x));
    await allReport(f, staying, 'done');
    expect([...f.applied].sort()).toEqual([...staying].sort());
    expect(f.maxInFlight).toBeLessThanOrEqual(2);
    expect(f.started.filter((x) => leaving.includes(x))).toEqual([]);
    await waitFor('the queue empty', async () => (await slots.queue()).length === 0);
  }, 120_000);

  it('a node keeps one lease: its queue keys are bound to it rollout after rollout, and stopping revokes it', async () => {
    // the first node's upgrade waits for the test, so all three are in the queue together
    let open!: () => void;
    let gate = Promise.resolve();
    // a TTL far longer than the waits below: a lease gone at stop was revoked, not lapsed
    const f = fleet({ apply: () => gate, slotTtlSeconds: 60 });
    const probe = connectEtcd({ endpoints: cluster.endpoints() });
    onTestFinished(() => probe.close());
    const leases = async (): Promise<Set<string>> =>
      new Set((await probe.leaseClient.leaseLeases()).leases.map((l) => String(l.ID)));
    const before = await leases();
    const fresh = async (): Promise<string[]> => [...(await leases())].filter((id) => !before.has(id)).sort();
    const nodes = names(3, 's');
    for (const node of nodes) await f.add(node);
    await waitFor('each node granted its lease', async () => (await fresh()).length === 3);
    const mine = await fresh();
    for (const [round, image] of [
      ['r-s1', 'img:2'],
      ['r-s2', 'img:3'],
    ] as const) {
      gate = new Promise<void>((r) => (open = r));
      await f.publish(`images: { svc: "${image}" }\nrollout: { id: ${round}, maxConcurrent: 1 }\n`);
      await waitFor('all three in the queue', async () => Object.keys(await f.slotHolders()).length === 3);
      const keys = Object.keys(await f.slotHolders()).map((k) => k.slice(k.lastIndexOf('/') + 1));
      expect(keys.sort()).toEqual(mine);
      open();
      await allReport(f, nodes, 'done');
      await waitFor('every slot released', async () => Object.keys(await f.slotHolders()).length === 0);
      expect(await fresh()).toEqual(mine); // no lease granted or revoked for a slot
    }
    await f.stop();
    await waitFor('the leases revoked at stop', async () => (await fresh()).length === 0, {
      timeoutMs: 10_000,
    });
  }, 120_000);

  it('completes when the leader, the member every write goes through, is SIGKILLed mid-rollout', async () => {
    const f = fleet({ apply: () => sleep(300) });
    const nodes = names(6, 'b');
    for (const node of nodes) await f.add(node);
    await f.publish('images: { svc: "img:2" }\nrollout: { id: r-b, maxConcurrent: 2 }\n');
    await waitFor('two nodes upgraded', () => f.applied.length >= 2, { timeoutMs: 60_000 });
    const leader = await cluster.leader();
    await cluster.kill(leader);
    const appliedAtKill = f.applied.length;
    expect(appliedAtKill).toBeLessThan(nodes.length);
    await allReport(f, nodes, 'done', undefined, 90_000);
    expect([...f.applied].sort()).toEqual([...nodes].sort());
    expect(f.maxInFlight).toBeLessThanOrEqual(2);
  }, 150_000);

  it('gives the slot of a SIGKILLed node to another once its lease expires, not before', async () => {
    const f = fleet({ apply: () => sleep(50) });
    const prefix = `/t${n}-${process.pid}/`;
    const ttl = 3;
    const child = spawn(
      process.execPath,
      [
        join(REPO, 'test/support/etcd-slot-holder.mjs'),
        cluster.endpoints().join(','),
        prefix,
        'dead-node',
        `${ttl}`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    await waitFor('the child holds the slot', () => out.includes('holding'), { timeoutMs: 30_000 });
    expect(Object.values(await f.slotHolders())).toEqual(['dead-node']);
    const nodes = names(2, 'c');
    for (const node of nodes) await f.add(node);
    await f.publish('images: { svc: "img:2" }\nrollout: { id: r-c, maxConcurrent: 1 }\n');
    await allReport(f, nodes, 'queued');
    expect(f.started).toEqual([]);
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const killedAt = Date.now();
    await waitFor('a live node took the slot', () => f.started.length > 0, { timeoutMs: 30_000 });
    // The lease is renewed every TTL/3: it lapses at least 2/3 of the TTL after the last renewal.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(((ttl * 2) / 3) * 1000 - 500);
    await allReport(f, nodes, 'done');
    expect([...f.applied].sort()).toEqual(nodes);
    expect(f.maxInFlight).toBe(1);
  }, 90_000);

  it('starts no upgrade without quorum, lets the running one finish, and resumes when quorum returns', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const f = fleet({ apply: (node) => (node === 'd-0' ? gate : sleep(50)) });
    const nodes = names(3, 'd');
    await f.add('d-0');
    await f.publish('images: { svc: "img:2" }\nrollout: { id: r-d, maxConcurrent: 1 }\n');
    await waitFor('d-0 upgrading', () => f.started.includes('d-0'), { timeoutMs: 30_000 });
    for (const node of nodes.slice(1)) await f.add(node);
    await allReport(f, nodes.slice(1), 'queued');
    const leader = await cluster.leader();
    const others = [0, 1, 2].filter((i) => i !== leader);
    // Kill the leader and one follower: the last member has no quorum.
    await cluster.kill(leader);
    await cluster.kill(others[0]!);
    // The running upgrade is not touched: it finishes on its own.
    open();
    await waitFor('d-0 finished its upgrade', () => f.applied.includes('d-0'), { timeoutMs: 30_000 });
    const d0 = f.nodes[0]!;
    await waitFor(
      'd-0 could not release its slot',
      () => d0.said.includes('fleet slot release failed; it frees when its lease expires'),
      { timeoutMs: 60_000 },
    );
    // A node that arrives now cannot read the cluster: it starts nothing either.
    const late = await f.add('d-late');
    await waitFor(
      'the late node failed to read etcd twice',
      () => late.said.filter((s) => s.startsWith('desired key unreadable')).length >= 2,
      { timeoutMs: 60_000 },
    );
    expect(f.started).toEqual(['d-0']);
    expect(f.inFlight).toBe(0);
    cluster.restart(leader);
    cluster.restart(others[0]!);
    await allReport(f, [...nodes, 'd-late'], 'done', undefined, 90_000).catch((err: unknown) => {
      throw new Error(
        `${(err as Error).message}\n${f.nodes.map((x) => `${x.name}: ${x.said.slice(-5).join(' | ')}`).join('\n')}`,
      );
    });
    expect([...f.applied].sort()).toEqual([...nodes, 'd-late'].sort());
    expect(f.maxInFlight).toBe(1);
  }, 180_000);

  it('stops after a failed canary: the other nodes never start the bad target', async () => {
    const f = fleet({
      apply: async () => {
        throw new SpcdError('UPGRADE_FAILED', 'the new container never became healthy; rolled back');
      },
    });
    const nodes = names(5, 'e');
    for (const node of nodes) await f.add(node);
    await f.publish(
      'images: { svc: "bad:1" }\nrollout: { id: r-e, maxConcurrent: 2, canary: { nodes: 1, soak: 0s } }\n',
    );
    await waitFor('the canary rolled back', async () =>
      [...(await f.phases()).values()].some((p) => p.phase === 'rolled-back' && p.canary),
    );
    const canary = f.started[0]!;
    await allReport(
      f,
      nodes.filter((x) => x !== canary),
      'held',
      'canary-failed',
    );
    expect(f.started).toEqual([canary]);
  });

  it('stops after K failures: the other nodes never start the bad target', async () => {
    const f = fleet({
      apply: async () => {
        throw new SpcdError('UPGRADE_FAILED', 'rolled back');
      },
    });
    const nodes = names(5, 'g');
    for (const node of nodes) await f.add(node);
    await f.publish(
      'images: { svc: "bad:1" }\nrollout: { id: r-g, maxConcurrent: 1, failureBudget: { maxFailed: 2 } }\n',
    );
    await waitFor(
      'two nodes rolled back',
      async () => [...(await f.phases()).values()].filter((p) => p.phase === 'rolled-back').length === 2,
    );
    const failed = [...f.started];
    expect(failed).toHaveLength(2);
    await allReport(
      f,
      nodes.filter((x) => !failed.includes(x)),
      'held',
      'budget-exhausted',
    );
    expect(f.started).toEqual(failed);
  });
});
