import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
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
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { RolloutRunner } from '../../agent/rollout/runner.js';
import { FakeClock } from '../support/fake-clock.js';
import { until } from '../support/fake-reconciler.js';
import { FakeKubeServer } from '../support/kube-server.js';
import type { V1Lease } from '@kubernetes/client-node';

/**
 * Rollouts over the Kubernetes backend: in-process nodes, each through the
 * real @kubernetes/client-node, coordinate through the in-test API server
 * (the desired ConfigMap, the ledger Lease, their phase Leases, slot Leases).
 * Their timers run on a fake clock that a test moves while it waits.
 */
const log = silentLogger();
const server = new FakeKubeServer();
let nsSeq = 0;
let stops: (() => Promise<void>)[] = [];
let clock = new FakeClock();

/** Moves the fake clock until `cond` holds (an hour of fake time, 30 s of real time at most). */
const waitFor = (what: string, cond: () => boolean): Promise<number> =>
  until(clock, what, cond, { stepMs: 20, maxFakeMs: 3_600_000, realMs: 30_000 });

beforeAll(() => server.start());
beforeEach(() => {
  clock = new FakeClock();
});
afterEach(async () => {
  await Promise.all(stops.map((s) => s()));
  stops = [];
});
afterAll(() => server.stop());

interface TestNode {
  readonly name: string;
  applied: number;
  pulls: number;
  /** The times it decided to look again later (each recheck draws its delay once). */
  rechecks: number;
}

async function fleet(
  ns: string,
  count: number,
  behave: { apply?: () => Promise<void>; prePull?: (n: TestNode) => Promise<void> } = {},
): Promise<TestNode[]> {
  const nodes: TestNode[] = [];
  for (let i = 0; i < count; i++) {
    const node: TestNode = { name: `compute-${i}`, applied: 0, pulls: 0, rechecks: 0 };
    const api = new KubeClient(server.kubeConfig(ns).kc, { callTimeoutMs: 5000 });
    const runner = new RolloutRunner({
      node: node.name,
      backend: new KubeRolloutBackend({
        api,
        namespace: ns,
        node: node.name,
        configMap: 'spcd-desired',
        // far longer than a test: a call slowed by the loaded machine never lets a lease expire
        leaseDurationSeconds: 3600,
        clock,
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
          await behave.apply?.();
        },
        health: () => 'healthy',
      },
      clock,
      log,
      random: () => {
        node.rechecks++;
        return 0.5;
      },
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

/** Waits until each of `nodes` has looked again `times` more times. */
async function rechecked(nodes: TestNode[], times: number): Promise<void> {
  const from = nodes.map((n) => n.rechecks);
  await waitFor(`${nodes.length} nodes rechecked ${times} times`, () =>
    nodes.every((n, i) => n.rechecks >= from[i]! + times),
  );
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
      // several rechecks of every held node: still nobody else
      await rechecked(
        nodes.filter((n) => n.applied === 0),
        3,
      );
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
      await rechecked(
        nodes.filter((n) => n.applied === 0),
        3,
      );
      expect(nodes.filter((n) => n.applied > 0)).toHaveLength(2);
      expect(ledgerFrom(server.get('leases', ns, LEDGER_LEASE) as V1Lease)?.failed).toHaveLength(2);
    });

    it('pause holds the fleet, resume (the same rollout, paused: false) lets it finish within N', async () => {
      const ns = `ro-${++nsSeq}`;
      const nodes = await fleet(ns, 5);
      desired(ns, 'id: nova-30\nmaxConcurrent: 2\npaused: true\n');
      await waitFor('all paused', () => phases(ns).filter((p) => p.phase === 'paused').length === 5);
      await rechecked(nodes, 3);
      expect(nodes.every((n) => n.applied === 0)).toBe(true);
      desired(ns, 'id: nova-30\nmaxConcurrent: 2\npaused: false\n');
      await waitFor('all done', () => phases(ns).filter((p) => p.phase === 'done').length === 5);
      expect(nodes.every((n) => n.applied === 1 && n.pulls === 1)).toBe(true);
      expect(phases(ns).every((p) => p.rollout === 'nova-30')).toBe(true);
    });

    it('a maintenance window holds nodes out until it opens', async () => {
      const ns = `ro-${++nsSeq}`;
      const nodes = await fleet(ns, 3);
      // opens in a day: the clock moves there only once every node is held for it
      const opens = clock.now() + 86_400_000;
      const from = new Date(opens).toISOString();
      const to = new Date(opens + 3_600_000).toISOString();
      desired(ns, `windows:\n  - { from: "${from}", to: "${to}" }\n`);
      await waitFor('all held for the window', () =>
        phases(ns).filter((p) => p.reason === 'window-closed').length === 3 ? true : false,
      );
      expect(nodes.every((n) => n.applied === 0)).toBe(true);
      expect(clock.now()).toBeLessThan(opens);
      clock.advance(opens - clock.now());
      await waitFor(
        'all done once it opened',
        () => phases(ns).filter((p) => p.phase === 'done').length === 3,
      );
      expect(clock.now()).toBeGreaterThanOrEqual(Date.parse(from));
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
