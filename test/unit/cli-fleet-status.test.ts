import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatFleetStatus, progressBar } from '../../agent/cli/fleet-status.js';
import {
  LEDGER_ANNOTATION,
  LEDGER_LEASE,
  PHASE_ANNOTATION,
  PHASE_LABEL,
} from '../../agent/kube/rollout-backend.js';
import { readFleetStatus } from '../../agent/kube/fleet-status.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { runSpcctl } from '../support/cli-run.js';
import { FakeKubeServer } from '../support/kube-server.js';

/** `spcctl fleet status` reads the rollout through the Kubernetes API (in-test server), not the socket. */
const NS = 'spcd-system';
const server = new FakeKubeServer();
let kubeconfig = '';

// the in-test server is plain http:// on loopback: what --kube-insecure is for (test/security/kubeconfig-trust.test.ts)
const cli = (args: string[]) => runSpcctl([...args, '--kube-insecure']);
/** The one line spcctl says for --kube-insecure. */
const INSECURE_LINE =
  /^spcctl: warning: --kube-insecure: kubeconfig \S+, context "fake", cluster "fake": its server http:\/\/127\.0\.0\.1:\d+ is plain http:\/\/[^\n]*\n$/;

function phase(node: string, p: PhaseReport['phase'], extra: Partial<PhaseReport> = {}): void {
  const r: PhaseReport = { node, rollout: 'nova-30', phase: p, since: Date.now() - 90_000, ...extra };
  server.put('leases', NS, {
    metadata: {
      name: `spcd-node-${node}`,
      labels: { [PHASE_LABEL]: 'true' },
      annotations: { [PHASE_ANNOTATION]: JSON.stringify(r) },
    },
    spec: { holderIdentity: node },
  });
}

beforeAll(async () => {
  await server.start();
  kubeconfig = server.kubeConfig(NS).path;
  server.put('configmaps', NS, {
    metadata: { name: 'spcd-desired' },
    data: {
      images: 'nova_compute: nova:30\n',
      rollout:
        'id: nova-30\nmaxConcurrent: 4\ncanary: { nodes: 1, soak: 10m }\nfailureBudget: { maxFailed: 3 }\n',
    },
  });
  server.put('leases', NS, {
    metadata: {
      name: LEDGER_LEASE,
      annotations: {
        [LEDGER_ANNOTATION]: JSON.stringify({
          rollout: 'nova-30',
          canaries: { 'compute-0': 'passed' },
          failed: ['compute-5'],
        }),
      },
    },
    spec: {},
  });
  phase('compute-0', 'done', { canary: true });
  phase('compute-1', 'done');
  phase('compute-2', 'upgrading');
  phase('compute-3', 'queued');
  phase('compute-4', 'pull-failed', { reason: 'IMAGE_PULL_FAILED', message: 'registry refused' });
  phase('compute-5', 'rolled-back', { reason: 'UPGRADE_FAILED' });
  phase('compute-6', 'done', { rollout: 'nova-29' });
});
afterAll(() => server.stop());

describe('spcctl fleet status', () => {
  it('draws a progress bar of done and failed nodes', () => {
    expect(progressBar(0, 0, 10, 10)).toBe('[..........]');
    expect(progressBar(5, 1, 10, 10)).toBe('[#####x....]');
    expect(progressBar(10, 0, 10, 10)).toBe('[##########]');
    expect(progressBar(0, 0, 0, 4)).toBe('[....]');
  });

  it('shows the rollout at a glance through the Kubernetes API, without spcd', async () => {
    const r = await cli(['fleet', 'status', '--kubeconfig', kubeconfig]);
    expect(r.err).toMatch(INSECURE_LINE);
    expect(r.code).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toBe('rollout nova-30  rolling  N=4  canary 1/1 passed, soak 10m  failed 1 of budget 3');
    expect(lines[1]).toBe(`[${'#'.repeat(10)}${'x'.repeat(5)}${'.'.repeat(15)}] 2/6 done (33%)`);
    expect(lines[2]).toBe('pull-failed 1  queued 1  upgrading 1  done 2  rolled-back 1');
    expect(r.out).toContain(
      'needs attention:\n  compute-4  pull-failed  IMAGE_PULL_FAILED: registry refused  for 90s',
    );
    expect(r.out).toContain('  compute-5  rolled-back  UPGRADE_FAILED');
    expect(r.out).toContain('1 node(s) last reported on another rollout');
  });

  it('--json carries the summary; --nodes lists every node', async () => {
    const j = await cli(['--json', 'fleet', 'status', '--kubeconfig', kubeconfig]);
    const doc = JSON.parse(j.out) as {
      summary: { state: string; nodes: number; counts: Record<string, number> };
    };
    expect(doc.summary).toMatchObject({ state: 'rolling', nodes: 6, counts: { done: 2, 'rolled-back': 1 } });
    const all = await cli(['fleet', 'status', '--kubeconfig', kubeconfig, '--nodes']);
    expect(all.out.match(/^ {2}compute-\d /gm)).toHaveLength(6);
  });

  it('names the field of an invalid rollout object', async () => {
    const other = 'broken-desired';
    server.put('configmaps', NS, { metadata: { name: other }, data: { rollout: 'canary: { nodes: 0 }\n' } });
    const r = await cli(['fleet', 'status', '--kubeconfig', kubeconfig, '--configmap', other]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('rollout.canary.nodes must be a whole number >= 1');
  });

  it('an unreachable API server exits 3', async () => {
    const dead = new FakeKubeServer();
    await dead.start();
    const path = dead.kubeConfig(NS).path;
    await dead.stop();
    const r = await cli(['fleet', 'status', '--kubeconfig', path]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('the Kubernetes API does not answer');
  });

  it('without a desired ConfigMap, says nothing is rolled out', async () => {
    const s = await readFleetStatus({ kubeconfig, configMap: 'absent', now: Date.now(), insecure: true });
    expect(formatFleetStatus(s)).toContain('nothing is being rolled out');
  });
});
