import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { REPO } from '../support/daemon.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { EtcdFleet } from '../support/etcd-fleet.js';
import { waitFor } from '../support/wait.js';

/**
 * `spcctl fleet status --etcd-endpoints …`, the real binary (bin/spcctl.js
 * over dist/), against a real 3-member etcd cluster and in-process nodes
 * mid-rollout (test/support/etcd-fleet.ts, the fixtures of
 * etcd-rollout.test.ts): what it prints while nodes upgrade and queue, when
 * the rollout is complete with a failure, and when the cluster has lost its
 * quorum or is down.
 */
let cluster: EtcdCluster;
let fleet: EtcdFleet | undefined;
const PREFIX = `/fleet-status-${process.pid}/`;

beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
}, 90_000);

afterAll(async () => {
  await fleet?.stop();
  await cluster?.stop();
});

interface Run {
  readonly code: number;
  readonly out: string;
  readonly err: string;
  readonly ms: number;
}

/** The real spcctl, as an operator runs it (no spcd socket anywhere). */
function spcctl(...args: string[]): Promise<Run> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/spcctl.js', ...args],
      {
        cwd: REPO,
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, SPCD_SOCKET: '/nonexistent.sock' },
      },
      (err, out, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, out, err: stderr, ms: Date.now() - t0 });
      },
    );
  });
}

const status = (...more: string[]): Promise<Run> =>
  spcctl(
    'fleet',
    'status',
    '--etcd-endpoints',
    cluster.endpoints().join(','),
    '--etcd-insecure',
    '--etcd-prefix',
    PREFIX,
    ...more,
  );

const NODES = ['cmp-0', 'cmp-1', 'cmp-2', 'cmp-3', 'cmp-4'];

describe('spcctl fleet status over a real etcd cluster', { timeout: 150_000 }, () => {
  it('shows a rollout under way, then complete with its failure, as over Kubernetes', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let begun = 0;
    fleet = new EtcdFleet({
      endpoints: cluster.endpoints(),
      prefix: PREFIX,
      slotTtlSeconds: 10,
      // every upgrade waits for the gate; the first to start fails (rolled back)
      apply: async () => {
        const first = begun++ === 0;
        await gate;
        if (first)
          throw new SpcdError('UPGRADE_FAILED', 'the new container never became healthy; rolled back');
      },
    });
    for (const node of NODES) await fleet.add(node);
    await fleet.publish(
      'images: { svc: "img:2" }\nrollout: { id: r-status, maxConcurrent: 2, failureBudget: { maxFailed: 2 } }\n',
    );
    const phases = async (): Promise<string[]> =>
      [...(await fleet!.phases()).values()].filter((p) => p.rollout === 'r-status').map((p) => p.phase);
    await waitFor(
      'two nodes upgrading, three queued',
      async () => {
        const p = await phases();
        return (
          p.filter((x) => x === 'upgrading').length === 2 && p.filter((x) => x === 'queued').length === 3
        );
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const upgrading = [...fleet.started].sort();
    expect(upgrading).toHaveLength(2);

    const mid = await status();
    // plain http (the test's cluster on loopback): one warning line, nothing else
    expect(mid.err).toMatch(/^spcctl: warning: --etcd-insecure: [^\n]*\n$/);
    expect(mid.code).toBe(0);
    const lines = mid.out.split('\n');
    expect(lines[0]).toBe('rollout r-status  rolling  N=2  failed 0 of budget 2');
    expect(lines[1]).toBe(`[${'.'.repeat(30)}] 0/5 done (0%)`);
    expect(lines[2]).toBe('queued 3  upgrading 2');
    expect(lines[3]).toMatch(/^slots held: \S+, \S+$/);
    expect(lines[3]!.slice('slots held: '.length).split(', ').sort()).toEqual(upgrading);
    expect(lines.slice(4)).toEqual(['']);

    const all = await status('--nodes');
    expect(all.out.match(/^ {2}cmp-\d {2}(queued|upgrading) {2}for \d+/gm)).toHaveLength(5);
    const json = await status('--json');
    const doc = JSON.parse(json.out) as {
      backend: string;
      endpoints: string[];
      desiredKey: string;
      summary: { state: string; nodes: number; counts: Record<string, number> };
      slots: { holder: string }[];
    };
    expect(doc).toMatchObject({
      backend: 'etcd',
      endpoints: cluster.endpoints(),
      desiredKey: `${PREFIX}desired`,
      summary: { state: 'rolling', nodes: 5, counts: { queued: 3, upgrading: 2 } },
    });
    expect(doc.slots.map((s) => s.holder).sort()).toEqual(upgrading);

    open();
    await waitFor(
      'every node final, every slot free',
      async () =>
        (await phases()).filter((x) => x === 'done' || x === 'rolled-back').length === 5 &&
        Object.keys(await fleet!.slotHolders()).length === 0,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const end = await status();
    expect(end.code).toBe(0);
    const failed = fleet.started[0]!;
    expect(end.out.split('\n')).toEqual([
      'rollout r-status  complete  N=2  failed 1 of budget 2',
      `[${'#'.repeat(24)}${'x'.repeat(6)}] 4/5 done (80%)`,
      'done 4  rolled-back 1',
      'needs attention:',
      expect.stringMatching(
        new RegExp(
          `^  ${failed}  rolled-back  UPGRADE_FAILED: the new container never became healthy; rolled back  for \\d+`,
        ),
      ),
      '',
    ]);
    await fleet.stop();
    fleet = undefined;
  });

  it('without quorum, and with the whole cluster down: exit 3 naming the endpoints, within its deadline', async () => {
    const endpoints = cluster.endpoints().join(', ');
    const leader = await cluster.leader();
    await cluster.kill(leader);
    await cluster.kill((leader + 1) % 3);
    const noQuorum = await status();
    expect(noQuorum.code).toBe(3);
    expect(noQuorum.err).toContain(`spcctl: etcd does not answer at ${endpoints} (ETCD_UNAVAILABLE): etcd: `);
    expect(noQuorum.out).toBe('');
    // the read's deadline is 10 s; slack for node's start on a loaded machine
    expect(noQuorum.ms).toBeLessThan(30_000);
    await cluster.kill((leader + 2) % 3);
    const down = await status();
    expect(down.code).toBe(3);
    expect(down.err).toContain(`spcctl: etcd does not answer at ${endpoints} (ETCD_UNAVAILABLE): etcd: `);
    expect(down.ms).toBeLessThan(30_000);
  });
});
