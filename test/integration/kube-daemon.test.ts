import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { waitFor } from '../support/wait.js';
import type { V1Lease } from '@kubernetes/client-node';
import { LEDGER_LEASE, ledgerFrom, phaseFrom, phaseLeaseName } from '../../agent/kube/rollout-backend.js';

/**
 * The daemon's Kubernetes glue, end to end: a real spcd given a kubeconfig
 * that points at the in-test API server publishes its node annotation and
 * condition, records Events, and upgrades when the desired ConfigMap says so,
 * taking a Lease slot first.
 */
const NS = 'spcd-system';
const NODE = 'compute-7';
const sb: Sandbox = sandbox('kubed');
const n = (s: string): string => `${sb.instance}-${s}`;
const server = new FakeKubeServer();
let spcd: SpcdProcess;
const templates = join(sb.root, 'templates');
const globalsFile = join(sb.root, 'globals.yaml');
const configRoot = join(sb.root, 'config');

type Obj = {
  metadata: { annotations?: Record<string, string> };
  status?: { conditions?: { type: string; status: string }[] };
};

beforeAll(async () => {
  await server.start();
  server.put('nodes', null, { metadata: { name: NODE }, status: { conditions: [] } });
  writeSet(sb, 'k.yaml', `set: k\ncontainers:\n${demoContainerYaml(n('svc'), ['stop_grace_period: 1s'])}`);
  // g's file uses `level`; h's uses `mode`, and h is healthy only while its file says "mode = good".
  mkdirSync(templates);
  writeFileSync(join(templates, 'g.conf.j2'), '[DEFAULT]\nlevel = {{ level }}\n');
  writeFileSync(join(templates, 'h.conf.j2'), '[DEFAULT]\nmode = {{ mode }}\n');
  writeFileSync(globalsFile, 'level: 1\nmode: good\n');
  writeSet(
    sb,
    'g.yaml',
    `set: g
containers:
  ${n('g')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    config:
      - { template: g.conf.j2, dest: g.conf, container_path: /etc/g/g.conf, mode: '0644' }
  ${n('h')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    config:
      - { template: h.conf.j2, dest: h.conf, container_path: /etc/h/h.conf, mode: '0644' }
    healthchecks:
      - { name: mode, shell: "grep -q 'mode = good' /var/lib/kolla/config_files/h.conf", interval: 1s, timeout: 900ms, failure_threshold: 1 }
`,
  );
  spcd = SpcdProcess.start(sb, [
    '--templates',
    templates,
    '--globals',
    globalsFile,
    '--config-root',
    configRoot,
    '--gate-deadline',
    '8s',
    '--kubeconfig',
    server.kubeConfig(NS).path,
    // the in-test API server is plain http:// on loopback
    '--kube-insecure',
    '--node-name',
    NODE,
    '--kube-desired-configmap',
    'spcd-desired',
    '--fleet-slots',
    '1',
  ]);
  await spcd.ready();
  await waitFor('svc, g and h running', async () =>
    (await Promise.all(['svc', 'g', 'h'].map((x) => inspect(n(x))))).every((c) => c?.State.Running),
  );
});

afterAll(async () => {
  await spcd?.stop();
  await server.stop();
  await cleanupInstance(sb.instance);
});

describe('spcd in a cluster (in-test API server, real client)', () => {
  inOrder();
  it('publishes its sets on the Node annotation and a SpcdComputeHealthy condition', async () => {
    const node = await waitFor('annotation published', () => {
      const o = server.get('nodes', null, NODE) as unknown as Obj | undefined;
      return o?.metadata.annotations?.['spcd.openstack.org/sets'] ? o : undefined;
    });
    expect(node.metadata.annotations!['spcd.openstack.org/sets']).toContain(n('svc'));
    await waitFor('condition published', () => {
      const o = server.get('nodes', null, NODE) as unknown as Obj | undefined;
      return o?.status?.conditions?.some((c) => c.type === 'SpcdComputeHealthy');
    });
  });

  it('upgrades through a Lease slot when the desired ConfigMap names a new image, and records an Event', async () => {
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: `${n('svc')}: spcd-demo/service:2\n` },
    });
    await waitFor(
      'svc upgraded to :2 at generation 2',
      async () => {
        const c = await inspect(n('svc'));
        return (
          c?.Config.Image === 'spcd-demo/service:2' &&
          c.Config.Labels['spcd.generation'] === '2' &&
          c.State.Running
        );
      },
      { timeoutMs: 30_000 },
    ).catch((err: unknown) => {
      const said = spcd.output.filter((l) => /kube|fleet|upgrade|lease|desired|operation/i.test(l));
      throw new Error(`${(err as Error).message}\nspcd said:\n${said.slice(-25).join('\n')}`);
    });
    expect(
      server.calls.some((c) => c.resource === 'leases' && (c.verb === 'create' || c.verb === 'update')),
    ).toBe(true);
    await waitFor('an Event recorded', () => server.list('events', NS).length > 0 || undefined, {
      timeoutMs: 15_000,
    });
  });

  const fileIn = (c: string, f: string): string =>
    execFileSync('/usr/bin/docker', ['exec', n(c), 'cat', `/var/lib/kolla/config_files/${f}`], {
      encoding: 'utf8',
    });
  /** Writes of the slot Leases (not the ledger's, not the phase Leases). */
  const leaseWrites = (): number =>
    server.calls.filter(
      (c) =>
        c.resource === 'leases' &&
        c.name?.startsWith('spcd-upgrade-slot-') !== false &&
        (c.verb === 'create' || c.verb === 'update'),
    ).length;
  const explain = (err: unknown): never => {
    const said = spcd.output.filter((l) => /kube|fleet|globals|upgrade|rollback|operation|reload/i.test(l));
    throw new Error(`${(err as Error).message}\nspcd said:\n${said.slice(-25).join('\n')}`);
  };

  it('applies globals from the ConfigMap over the globals file: recreates only containers whose files change, under a slot', async () => {
    const before = {
      svc: (await inspect(n('svc')))!.State.StartedAt,
      h: (await inspect(n('h')))!.State.StartedAt,
    };
    const writes = leaseWrites();
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: `${n('svc')}: spcd-demo/service:2\n`, globals: 'level: 7\n' },
    });
    await waitFor(
      'g recreated at generation 2 with level = 7',
      async () => {
        const c = await inspect(n('g'));
        return (
          c?.Config.Labels['spcd.generation'] === '2' &&
          c.State.Running &&
          fileIn('g', 'g.conf').includes('level = 7')
        );
      },
      { timeoutMs: 30_000 },
    ).catch(explain);
    expect(fileIn('g', 'g.conf')).toBe('[DEFAULT]\nlevel = 7\n');
    // h's file does not change (mode comes from the globals file still), svc's image was already :2
    expect((await inspect(n('h')))!.State.StartedAt).toBe(before.h);
    expect((await inspect(n('h')))!.Config.Labels['spcd.generation']).toBe('1');
    expect((await inspect(n('svc')))!.State.StartedAt).toBe(before.svc);
    await waitFor('cluster globals applied', () =>
      spcd.output.some((l) => l.includes('cluster globals applied')),
    );
    // under a Lease slot: taken, then released
    await waitFor('slot taken and released', () => leaseWrites() >= writes + 2 || undefined);
    // kept for a restart, so the next start renders with them
    expect(JSON.parse(readFileSync(join(sb.stateDir, 'cluster-globals.json'), 'utf8'))).toEqual({ level: 7 });
  });

  it('a globals change that fails the health gate is rolled back: the old config runs again', async () => {
    const h1 = (await inspect(n('h')))!;
    const gStarted = (await inspect(n('g')))!.State.StartedAt;
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: `${n('svc')}: spcd-demo/service:2\n`, globals: 'level: 7\nmode: bad\n' },
    });
    await waitFor(
      'the globals change reported as rolled back',
      () =>
        spcd.output.some((l) => l.includes('fleet upgrade did not complete') && l.includes('rolled back')),
      { timeoutMs: 60_000 },
    ).catch(explain);
    const h = (await inspect(n('h')))!;
    expect(h.State.Running).toBe(true);
    expect(h.Config.Labels['spcd.config-hash']).toBe(h1.Config.Labels['spcd.config-hash']);
    expect(fileIn('h', 'h.conf')).toBe('[DEFAULT]\nmode = good\n');
    // g's file is the same under the new globals: left alone
    expect((await inspect(n('g')))!.State.StartedAt).toBe(gStarted);
    // the node's phase and the ledger say so, and spcctl shows it from the API server, not the socket
    const report = phaseFrom(server.get('leases', NS, phaseLeaseName(NODE)) as V1Lease | undefined);
    expect(report).toMatchObject({ phase: 'rolled-back', reason: 'UPGRADE_FAILED' });
    expect(ledgerFrom(server.get('leases', NS, LEDGER_LEASE) as V1Lease | undefined)?.failed).toEqual([NODE]);
    // run async: the in-test API server answers from this very process
    const { stdout: out } = await promisify(execFile)(
      process.execPath,
      [
        'bin/spcctl.js',
        '--socket',
        '/nonexistent.sock',
        'fleet',
        'status',
        '--kubeconfig',
        server.kubeConfig(NS).path,
        '--kube-insecure',
      ],
      { encoding: 'utf8' },
    );
    expect(out).toContain(`rollout ${report!.rollout}  complete`);
    expect(out).toContain(`[${'x'.repeat(30)}] 0/1 done (0%)`);
    expect(out).toMatch(new RegExp(`^  ${NODE}  rolled-back  UPGRADE_FAILED: .*rolled back`, 'm'));
  });

  it('pulls the new images before asking for a slot: a pull failure takes no slot and changes nothing', async () => {
    const g1 = (await inspect(n('g')))!;
    const writes = leaseWrites();
    const warned = spcd.output.length;
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      // a registry on a closed loopback port: the pull fails at once
      data: { images: `${n('g')}: 127.0.0.1:9/spcd-missing:1\n`, globals: 'level: 7\nmode: bad\n' },
    });
    const line = await waitFor(
      'pre-pull failure reported',
      () => spcd.output.slice(warned).find((l) => l.includes('pre-pull failed; not queued')),
      { timeoutMs: 60_000 },
    ).catch(explain);
    expect(JSON.parse(line)).toMatchObject({ phase: 'pull-failed', code: 'IMAGE_PULL_FAILED' });
    // its own phase, on the node's phase Lease, for `spcctl fleet status`
    await waitFor('phase pull-failed published', () => {
      const lease = server.get('leases', NS, phaseLeaseName(NODE)) as V1Lease | undefined;
      return phaseFrom(lease)?.phase === 'pull-failed' || undefined;
    });
    expect(leaseWrites()).toBe(writes);
    const g = (await inspect(n('g')))!;
    expect(g.Id).toBe(g1.Id);
    expect(g.Config.Image).toBe('spcd-demo/service:1');
  });
});
