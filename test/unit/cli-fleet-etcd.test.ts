import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatFleetStatus } from '../../agent/cli/fleet-status.js';
import { connectEtcd } from '../../agent/etcd/client.js';
import { clientRangeRead, etcdFleetStatus, readEtcdFleetStatus } from '../../agent/etcd/fleet-status.js';
import type { SpcdError } from '../../agent/errors.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import type { FleetStatus } from '../../agent/rollout/fleet-view.js';
import { runSpcctl } from '../support/cli-run.js';

/**
 * `spcctl fleet status` over etcd: the view made from the records under the
 * prefix (the etcd boundary faked as one range read), rendered by the same
 * renderer as over Kubernetes; the flags checked by spcd's own parser; a
 * cluster that does not answer. The real cluster: test/integration/etcd-fleet-status.test.ts.
 */
const NOW = Date.parse('2026-11-24T08:00:00Z');
const P = '/spcd/';
const where = { endpoints: ['http://10.0.0.1:2379'], prefix: P };

const cli = (args: string[]) => runSpcctl(args);

/** The etcd boundary: the keys a cluster holds, read by prefix at one revision. */
/** Each key's create revision: its place in `keys` unless `created` names it. */
function fakeEtcd(keys: Record<string, string>, revision = '42', created: Record<string, number> = {}) {
  const reads: string[] = [];
  const read = async (prefix: string) => {
    reads.push(prefix);
    return {
      revision,
      kvs: Object.entries(keys)
        .map(([key, value], i) => ({ key, value, createRevision: String(created[key] ?? i + 1) }))
        .filter(({ key }) => key.startsWith(prefix)),
    };
  };
  return { read, reads };
}

const phase = (node: string, p: PhaseReport['phase'], extra: Partial<PhaseReport> = {}): [string, string] => [
  `${P}nodes/${node}`,
  JSON.stringify({ node, rollout: 'nova-30', phase: p, since: NOW - 90_000, ...extra }),
];

/** The records of test/unit/cli-fleet-status.test.ts (the Kubernetes path), as keys. */
const FLEET: Record<string, string> = Object.fromEntries([
  [
    `${P}desired`,
    'images: { nova_compute: "nova:30" }\nrollout: { id: nova-30, maxConcurrent: 4, canary: { nodes: 1, soak: 10m }, failureBudget: { maxFailed: 3 } }\n',
  ],
  [
    `${P}rollout/ledger`,
    JSON.stringify({ rollout: 'nova-30', canaries: { 'compute-0': 'passed' }, failed: ['compute-5'] }),
  ],
  phase('compute-0', 'done', { canary: true }),
  phase('compute-1', 'done'),
  phase('compute-2', 'upgrading'),
  phase('compute-3', 'queued'),
  phase('compute-4', 'pull-failed', { reason: 'IMAGE_PULL_FAILED', message: 'registry refused' }),
  phase('compute-5', 'rolled-back', { reason: 'UPGRADE_FAILED' }),
  phase('compute-6', 'done', { rollout: 'nova-29' }),
  [`${P}nodes/compute-7`, 'not json'], // unreadable: skipped, as the runner skips it
  [`${P}queue/694d1f`, JSON.stringify({ node: 'compute-2' })],
  [`${P}slots/0`, 'compute-8'], // not a queue key (the layout before decision 0029)
  [
    '/other/nodes/compute-9',
    JSON.stringify({ node: 'compute-9', rollout: 'nova-30', phase: 'failed', since: 0 }),
  ],
]);

async function refused(p: Promise<unknown>): Promise<SpcdError> {
  try {
    await p;
  } catch (err) {
    return err as SpcdError;
  }
  throw new Error('accepted');
}

describe('the fleet view from etcd records', () => {
  it('is the Kubernetes view: the same lines from the same records, in one read of the prefix', async () => {
    const etcd = fakeEtcd(FLEET);
    const s = await readEtcdFleetStatus(etcd.read, where, NOW);
    expect(etcd.reads).toEqual([P]);
    const lines = formatFleetStatus(s).split('\n');
    // the lines test/unit/cli-fleet-status.test.ts expects over Kubernetes
    expect(lines[0]).toBe('rollout nova-30  rolling  N=4  canary 1/1 passed, soak 10m  failed 1 of budget 3');
    expect(lines[1]).toBe(`[${'#'.repeat(10)}${'x'.repeat(5)}${'.'.repeat(15)}] 2/6 done (33%)`);
    expect(lines[2]).toBe('pull-failed 1  queued 1  upgrading 1  done 2  rolled-back 1');
    expect(lines[3]).toBe('slots held: compute-2');
    expect(lines.slice(4, 7)).toEqual([
      'needs attention:',
      '  compute-4  pull-failed  IMAGE_PULL_FAILED: registry refused  for 90s',
      '  compute-5  rolled-back  UPGRADE_FAILED  for 90s',
    ]);
    expect(lines[7]).toBe('1 node(s) last reported on another rollout');
    expect(s.slots).toEqual([{ name: `${P}queue/694d1f`, holder: 'compute-2', renewedAt: null }]);
    expect(s.nodes.map((n) => n.node)).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `compute-${i}`));
  });

  it('shows as holders the N oldest queue keys by create revision, or the upgrading ones when N is not named', async () => {
    const doc = (rollout: string): Record<string, string> => ({
      [`${P}desired`]: `images: { svc: "img:2" }\nrollout: ${rollout}\n`,
      [`${P}queue/a`]: JSON.stringify({ node: 'compute-a' }),
      [`${P}queue/b`]: JSON.stringify({ node: 'compute-b', near: true }),
      [`${P}queue/c`]: 'compute-c', // written by hand: the text names the node
      [`${P}nodes/compute-c`]: JSON.stringify({
        node: 'compute-c',
        rollout: 'r',
        phase: 'upgrading',
        since: 0,
      }),
    });
    // created c, then a, then b: the keys' order in the listing is not their rank
    const created = { [`${P}queue/c`]: 7, [`${P}queue/a`]: 9, [`${P}queue/b`]: 12 };
    const two = await readEtcdFleetStatus(
      fakeEtcd(doc('{ id: r, maxConcurrent: 2 }'), '50', created).read,
      where,
      NOW,
    );
    expect(two.slots.map((x) => x.holder)).toEqual(['compute-a', 'compute-c']);
    expect(formatFleetStatus(two).split('\n')).toContain('slots held: compute-a, compute-c');
    const unnamed = await readEtcdFleetStatus(fakeEtcd(doc('{ id: r }'), '50', created).read, where, NOW);
    expect(unnamed.slots.map((x) => x.holder)).toEqual(['compute-c']);
  });

  it('shows no holder for a queue key no lease binds, or one under another node name', async () => {
    const kvs = [
      {
        key: `${P}desired`,
        value: 'images: { svc: "img:2" }\nrollout: { id: r, maxConcurrent: 3 }\n',
        lease: '0',
      },
      { key: `${P}queue/compute-b/5`, value: JSON.stringify({ node: 'compute-b' }), lease: '0' },
      { key: `${P}queue/compute-x/6`, value: JSON.stringify({ node: 'compute-c' }), lease: '6' },
      { key: `${P}queue/compute-a/11`, value: JSON.stringify({ node: 'compute-a' }), lease: '11' },
      { key: `${P}queue/12`, value: JSON.stringify({ node: 'compute-old' }), lease: '12' }, // an earlier spcd's key
      { key: `${P}queue/13`, value: JSON.stringify({ node: 'compute-z' }), lease: '0' },
    ].map((kv, i) => ({ ...kv, createRevision: String(i + 1) }));
    const s = await readEtcdFleetStatus(async () => ({ revision: '9', kvs }), where, NOW);
    expect(s.slots.map((x) => x.holder).sort()).toEqual(['compute-a', 'compute-old']);
  });

  it('carries where it was read in the JSON: backend, endpoints, prefix, desired key, revision', async () => {
    const s = await readEtcdFleetStatus(fakeEtcd(FLEET, '977').read, where, NOW);
    const doc = JSON.parse(JSON.stringify(s)) as FleetStatus;
    expect(doc).toMatchObject({
      backend: 'etcd',
      endpoints: ['http://10.0.0.1:2379'],
      prefix: P,
      desiredKey: `${P}desired`,
      revision: '977',
      desired: true,
      rollout: { id: 'nova-30', maxConcurrent: 4, paused: false },
      summary: { state: 'rolling', nodes: 6, counts: { done: 2, 'rolled-back': 1 }, failed: ['compute-5'] },
      at: NOW,
    });
  });

  it('reads another prefix only, and without a desired key says nothing is rolled out', async () => {
    const s = await readEtcdFleetStatus(fakeEtcd(FLEET).read, { ...where, prefix: '/other/' }, NOW);
    expect(s.desired).toBe(false);
    expect(s.nodes.map((n) => n.node)).toEqual(['compute-9']);
    expect(formatFleetStatus(s)).toBe(
      'no desired key /other/desired in etcd: nothing is being rolled out\n1 node(s) have reported a phase\n',
    );
  });

  it('a rollout without maxConcurrent shows the nodes default; a ledger of another rollout counts as empty', async () => {
    const keys = {
      [`${P}desired`]: 'images: { a: "a:2" }\nrollout: { id: r2 }\n',
      [`${P}rollout/ledger`]: JSON.stringify({ rollout: 'r1', canaries: {}, failed: ['x', 'y'] }),
    };
    const s = await readEtcdFleetStatus(fakeEtcd(keys).read, where, NOW);
    expect(s.rollout?.maxConcurrent).toBeUndefined();
    expect(s.summary?.failed).toEqual([]);
    expect(formatFleetStatus(s).split('\n')[0]).toBe('rollout r2  rolling  N=node default');
  });

  it('names the desired key, the part and the field of an invalid document', async () => {
    const bad = await refused(
      readEtcdFleetStatus(
        fakeEtcd({ [`${P}desired`]: 'rollout: { canary: { nodes: 0 } }\n' }).read,
        where,
        NOW,
      ),
    );
    expect(bad.code).toBe('SPEC_INVALID');
    expect(bad.message).toMatch(
      /^etcd key \/spcd\/desired, field rollout: rollout\.canary\.nodes must be a whole number >= 1, got 0$/,
    );
    const part = await refused(
      readEtcdFleetStatus(fakeEtcd({ [`${P}desired`]: 'imagez: {}\n' }).read, where, NOW),
    );
    expect(part.message).toBe(
      'etcd key /spcd/desired: imagez is not a part (known: images, globals, rollout)',
    );
  });
});

describe('spcctl fleet status --etcd-*', () => {
  it.each([
    [['--etcd-endpoints', '10.0.0.1:2379'], /^spcctl: --etcd-endpoints: '10\.0\.0\.1:2379' is not a URL/],
    [['--etcd-endpoints', 'http://10.0.0.1'], /^spcctl: --etcd-endpoints: .* must name a port/],
    [['--etcd-endpoints', ' , '], /^spcctl: --etcd-endpoints: names no endpoint/],
    [['--etcd-prefix', '/x/'], /^spcctl: --etcd-prefix is set but --etcd-endpoints is not/],
    [['--etcd-ca', '/ca.pem'], /^spcctl: --etcd-ca is set but --etcd-endpoints is not/],
    [['--etcd-endpoints', 'http://127.0.0.1:1', '--etcd-prefix', 'spcd'], /^spcctl: --etcd-prefix: 'spcd'/],
    [
      ['--etcd-endpoints', 'http://127.0.0.1:1'],
      /^spcctl: --etcd-endpoints: 'http:\/\/127\.0\.0\.1:1' is plaintext/,
    ],
    [['--etcd-endpoints', 'https://127.0.0.1:1'], /^spcctl: --etcd-ca: is required with https/],
    [
      [
        '--etcd-endpoints',
        'https://127.0.0.1:1',
        '--etcd-ca',
        '/nonexistent/ca.pem',
        '--etcd-cert',
        '/nonexistent/c.pem',
        '--etcd-key',
        '/nonexistent/k.pem',
      ],
      /^spcctl: --etcd-ca file \/nonexistent\/ca\.pem: cannot read it: ENOENT \(SPEC_IO\)/,
    ],
    [
      ['--etcd-endpoints', 'http://127.0.0.1:1', '--kubeconfig', '/k'],
      /^spcctl: --kubeconfig cannot be used with --etcd-endpoints/,
    ],
  ])('refuses %j naming the flag, exit 2', async (flags, message) => {
    const r = await cli(['fleet', 'status', ...flags]);
    expect(r.err).toMatch(message);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
  });
});

describe('a cluster that does not answer', () => {
  let silent: Server;
  let silentPort = 0;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    // accepts connections and never says a word (a hung member)
    silent = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    silentPort = (silent.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => silent.close(r));
  });

  /** A loopback port nobody listens on. */
  async function closedPort(): Promise<number> {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const port = (s.address() as { port: number }).port;
    await new Promise((r) => s.close(r));
    return port;
  }

  it('exits 3 naming every endpoint (ETCD_UNAVAILABLE)', async () => {
    const a = `http://127.0.0.1:${await closedPort()}`;
    const b = `http://127.0.0.1:${await closedPort()}`;
    const r = await cli(['fleet', 'status', '--etcd-endpoints', `${a},${b}`, '--etcd-insecure']);
    expect(r.code).toBe(3);
    expect(r.err).toContain(`spcctl: etcd does not answer at ${a}, ${b} (ETCD_UNAVAILABLE): etcd: reading`);
    expect(r.out).toBe('');
  });

  it('a read failure is ETCD_UNAVAILABLE', async () => {
    const client = connectEtcd({ endpoints: [`http://127.0.0.1:${await closedPort()}`], callTimeoutMs: 500 });
    try {
      const err = await refused(clientRangeRead(client)(P));
      expect(err.code).toBe('ETCD_UNAVAILABLE');
      expect(err.message).toMatch(/^etcd: reading the keys under \/spcd\/: /);
    } finally {
      client.close();
    }
  });

  it('a member that never answers: each call ends at its deadline, the whole read at its own', async () => {
    const member = { endpoints: [`http://127.0.0.1:${silentPort}`], prefix: P };
    let t0 = Date.now();
    const call = await refused(etcdFleetStatus(member, NOW, { callTimeoutMs: 300, deadlineMs: 60_000 }));
    expect(call.code).toBe('ETCD_UNAVAILABLE');
    expect(call.message).toMatch(/^etcd: reading the keys under \/spcd\/: /);
    // the client's retries of 300 ms calls, with slack for a loaded machine
    expect(Date.now() - t0).toBeLessThan(10_000);
    t0 = Date.now();
    const whole = await refused(etcdFleetStatus(member, NOW, { callTimeoutMs: 20_000, deadlineMs: 500 }));
    expect(whole.code).toBe('ETCD_UNAVAILABLE');
    expect(whole.message).toBe('etcd: no answer within 0.5s (no member reachable, or no quorum)');
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
