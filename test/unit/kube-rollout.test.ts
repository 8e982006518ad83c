import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { KubeClient } from '../../agent/kube/client.js';
import {
  KubeRolloutBackend,
  LEDGER_ANNOTATION,
  LEDGER_LEASE,
  ledgerFrom,
  phaseFrom,
  phaseLeaseName,
} from '../../agent/kube/rollout-backend.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { RolloutRunner } from '../../agent/rollout/runner.js';
import { FakeKubeServer } from '../support/kube-server.js';
import type { V1Lease } from '@kubernetes/client-node';

/**
 * Rollouts over the Kubernetes backend: in-process nodes, each through the
 * real @kubernetes/client-node, coordinate through the in-test API server
 * (the desired ConfigMap, the ledger Lease, their phase Leases, slot Leases).
 */
const log = silentLogger();
const server = new FakeKubeServer();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let nsSeq = 0;
let stops: (() => Promise<void>)[] = [];

async function waitFor(what: string, cond: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`${what}: not met in ${ms} ms`);
    await sleep(20);
  }
}

beforeAll(() => server.start());
afterEach(async () => {
  await Promise.all(stops.map((s) => s()));
  stops = [];
});
afterAll(() => server.stop());

interface TestNode {
  readonly name: string;
  applied: number;
  pulls: number;
}

async function fleet(
  ns: string,
  count: number,
  behave: { apply?: () => Promise<void>; prePull?: (n: TestNode) => Promise<void> } = {},
): Promise<TestNode[]> {
  const nodes: TestNode[] = [];
  for (let i = 0; i < count; i++) {
    const node: TestNode = { name: `compute-${i}`, applied: 0, pulls: 0 };
    const api = new KubeClient(server.kubeConfig(ns).kc, { callTimeoutMs: 5000 });
    const runner = new RolloutRunner({
      node: node.name,
      backend: new KubeRolloutBackend({
        api,
        namespace: ns,
        node: node.name,
        configMap: 'spcd-desired',
        leaseDurationSeconds: 5,
        clock: systemClock,
        log,
      }),
      actions: {
        pending: (d) => Object.keys(d.images).length > 0 && node.applied === 0,
        prePull: async () => {
          node.pulls++;
          await behave.prePull?.(node);
        },
        apply: async () => {
          node.applied++;
          await sleep(20);
          await behave.apply?.();
        },
        health: () => 'healthy',
      },
      clock: systemClock,
      log,
      defaultMaxConcurrent: 2,
      recheckMs: 100,
      pullRetryMs: 100,
      soakCheckMs: 50,
    });
    await runner.start();
    stops.push(async () => {
      await runner.stop();
      api.close();
    });
    nodes.push(node);
  }
  return nodes;
}

function desired(ns: string, rollout: string, image = 'nova:30'): void {
  server.put('configmaps', ns, {
    metadata: { name: 'spcd-desired' },
    data: { images: `nova_compute: ${image}\n`, rollout },
  });
}

function phases(ns: string): PhaseReport[] {
  return server
    .list('leases', ns)
    .map((l) => phaseFrom(l as V1Lease))
    .filter((p): p is PhaseReport => p !== undefined);
}

const badImage = async (): Promise<void> => {
  throw new SpcdError('UPGRADE_FAILED', 'health gate failed; rolled back');
};

describe(
  'rollouts over the Kubernetes backend (in-test API server, real client)',
  { timeout: 60_000 },
  () => {
    it('a bad image stops after the canary: the other nodes never start it', async () => {
      const ns = `ro-${++nsSeq}`;
      // a ledger left by an earlier rollout: admissions are updates guarded by its resourceVersion
      server.put('leases', ns, {
        metadata: {
          name: LEDGER_LEASE,
          annotations: { [LEDGER_ANNOTATION]: JSON.stringify({ rollout: 'old', canaries: {}, failed: [] }) },
        },
        spec: {},
      });
      const nodes = await fleet(ns, 6, { apply: badImage });
      desired(ns, 'maxConcurrent: 3\ncanary: { nodes: 1, soak: 1s }\n');
      await waitFor('the canary rolled back, the others held', () => {
        const p = phases(ns);
        return p.length === 6 && p.filter((x) => x.reason === 'canary-failed').length === 5;
      });
      await sleep(300); // several rechecks: still nobody else
      expect(nodes.filter((n) => n.applied > 0)).toHaveLength(1);
      const ledger = ledgerFrom(server.get('leases', ns, LEDGER_LEASE) as V1Lease);
      expect(ledger?.failed).toHaveLength(1);
      expect(Object.values(ledger?.canaries ?? {})).toEqual(['failed']);
      expect(phases(ns).filter((p) => p.phase === 'rolled-back')).toHaveLength(1);
    });

    it('stops after K failures; with N = 1, exactly K nodes start', async () => {
      const ns = `ro-${++nsSeq}`;
      const nodes = await fleet(ns, 6, { apply: badImage });
      desired(ns, 'maxConcurrent: 1\nfailureBudget: { maxFailed: 2 }\n');
      await waitFor('budget spent, the others held', () => {
        const p = phases(ns);
        return p.filter((x) => x.reason === 'budget-exhausted').length === 4;
      });
      await sleep(300);
      expect(nodes.filter((n) => n.applied > 0)).toHaveLength(2);
      expect(ledgerFrom(server.get('leases', ns, LEDGER_LEASE) as V1Lease)?.failed).toHaveLength(2);
    });

    it('pause holds the fleet, resume (the same rollout, paused: false) lets it finish within N', async () => {
      const ns = `ro-${++nsSeq}`;
      const nodes = await fleet(ns, 5);
      desired(ns, 'id: nova-30\nmaxConcurrent: 2\npaused: true\n');
      await waitFor('all paused', () => phases(ns).filter((p) => p.phase === 'paused').length === 5);
      await sleep(300);
      expect(nodes.every((n) => n.applied === 0)).toBe(true);
      desired(ns, 'id: nova-30\nmaxConcurrent: 2\npaused: false\n');
      await waitFor('all done', () => phases(ns).filter((p) => p.phase === 'done').length === 5);
      expect(nodes.every((n) => n.applied === 1 && n.pulls === 1)).toBe(true);
      expect(phases(ns).every((p) => p.rollout === 'nova-30')).toBe(true);
    });

    it('a maintenance window holds nodes out until it opens', async () => {
      const ns = `ro-${++nsSeq}`;
      const nodes = await fleet(ns, 3);
      const from = new Date(Date.now() + 1500).toISOString();
      const to = new Date(Date.now() + 3_600_000).toISOString();
      desired(ns, `windows:\n  - { from: "${from}", to: "${to}" }\n`);
      await waitFor('all held for the window', () =>
        phases(ns).filter((p) => p.reason === 'window-closed').length === 3 ? true : false,
      );
      expect(nodes.every((n) => n.applied === 0)).toBe(true);
      await waitFor(
        'all done once it opened',
        () => phases(ns).filter((p) => p.phase === 'done').length === 3,
      );
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(from));
    });

    it('a pre-pull failure keeps the node out of the queue: it takes no slot until the pull works', async () => {
      const ns = `ro-${++nsSeq}`;
      let registryUp = false;
      const [node] = await fleet(ns, 1, {
        prePull: async () => {
          if (!registryUp) throw new SpcdError('IMAGE_PULL_FAILED', 'registry refused');
        },
      });
      desired(ns, 'maxConcurrent: 1\n');
      await waitFor('pull retried', () => node!.pulls >= 3);
      // the report is written once it has settled (runner.ts phaseSettleMs)
      const report = () => phaseFrom(server.get('leases', ns, phaseLeaseName('compute-0')) as V1Lease);
      await waitFor('pull-failed reported', () => report()?.phase === 'pull-failed');
      expect(report()).toMatchObject({ phase: 'pull-failed', reason: 'IMAGE_PULL_FAILED' });
      // a slot pass lists the Leases, a take writes a slot Lease (the ledger and phases are read by name)
      const slotCalls = () =>
        server.calls.filter(
          (c) =>
            c.namespace === ns &&
            c.resource === 'leases' &&
            (c.name?.startsWith('spcd-upgrade-slot-') || c.verb === 'list' || c.verb === 'watch'),
        ).length;
      expect(slotCalls()).toBe(0);
      expect(node!.applied).toBe(0);
      registryUp = true;
      await waitFor('done once the pull works', () => phases(ns)[0]?.phase === 'done');
      expect(slotCalls()).toBeGreaterThan(0);
    });
  },
);
