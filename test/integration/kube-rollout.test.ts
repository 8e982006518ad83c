import type { V1Lease } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phaseFrom, phaseLeaseName } from '../../agent/kube/rollout-backend.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { waitFor } from '../support/wait.js';

/**
 * A rollout across three real spcd daemons (one container each) that
 * coordinate only through the in-test API server: a bad image stops at the
 * canary, and pause / resume hold and release the fleet.
 */
const NS = 'spcd-system';
const server = new FakeKubeServer();
const nodes = ['compute-a', 'compute-b', 'compute-c'];
const sbs: Sandbox[] = nodes.map((_, i) => sandbox(`kro${i}`));
const svc = (i: number): string => `${sbs[i]!.instance}-svc`;
const daemons: SpcdProcess[] = [];

const phase = (node: string): PhaseReport | undefined =>
  phaseFrom(server.get('leases', NS, phaseLeaseName(node)) as V1Lease | undefined);

function desired(image: string, rollout: string): void {
  server.put('configmaps', NS, {
    metadata: { name: 'spcd-desired' },
    data: { images: nodes.map((_, i) => `${svc(i)}: ${image}\n`).join(''), rollout },
  });
}

const explain = (err: unknown): never => {
  const said = daemons.flatMap((d, i) =>
    d.output
      .filter((l) => /fleet|rollout|upgrade|phase|ledger/i.test(l))
      .slice(-8)
      .map((l) => `${nodes[i]}: ${l}`),
  );
  throw new Error(
    `${(err as Error).message}\nphases: ${JSON.stringify(nodes.map(phase))}\n${said.join('\n')}`,
  );
};

beforeAll(async () => {
  await server.start();
  const kubeconfig = server.kubeConfig(NS).path;
  nodes.forEach((node, i) => {
    server.put('nodes', null, { metadata: { name: node }, status: { conditions: [] } });
    writeSet(
      sbs[i]!,
      's.yaml',
      `set: s\ncontainers:\n${demoContainerYaml(svc(i), ['stop_grace_period: 1s'])}`,
    );
    daemons.push(
      SpcdProcess.start(sbs[i]!, [
        '--gate-deadline',
        '5s',
        '--kubeconfig',
        kubeconfig,
        // the in-test API server is plain http:// on loopback
        '--kube-insecure',
        '--node-name',
        node,
        '--kube-desired-configmap',
        'spcd-desired',
        '--fleet-slots',
        '1',
      ]),
    );
  });
  await Promise.all(daemons.map((d) => d.ready()));
  await waitFor(
    'every svc running',
    async () => (await Promise.all(nodes.map((_, i) => inspect(svc(i))))).every((c) => c?.State.Running),
    { timeoutMs: 60_000 },
  );
}, 120_000);

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  await server.stop();
  await Promise.all(sbs.map((sb) => cleanupInstance(sb.instance)));
});

describe('a rollout across real spcd daemons', { timeout: 150_000 }, () => {
  it('a bad image stops after the canary: the other nodes never start it', async () => {
    desired('spcd-demo/service:crash', 'id: bad\nmaxConcurrent: 2\ncanary: { nodes: 1, soak: 2s }\n');
    await waitFor(
      'the canary rolled back, the two others held',
      () => {
        const p = nodes.map(phase);
        return (
          p.filter((x) => x?.rollout === 'bad' && x.phase === 'rolled-back').length === 1 &&
          p.filter((x) => x?.rollout === 'bad' && x.reason === 'canary-failed').length === 2
        );
      },
      { timeoutMs: 90_000 },
    ).catch(explain);
    const canary = nodes.findIndex((n) => phase(n)?.phase === 'rolled-back');
    for (let i = 0; i < nodes.length; i++) {
      const c = (await inspect(svc(i)))!;
      // the canary's container is its old generation again; the others never changed
      expect(c.Config.Image).toBe('spcd-demo/service:1');
      expect(c.State.Running).toBe(true);
      if (i !== canary) expect(c.Config.Labels['spcd.generation']).toBe('1');
      if (i !== canary)
        expect(
          daemons[i]!.output.some((l) => l.includes('spcd-demo/service:crash') && /upgrad/i.test(l)),
        ).toBe(false);
    }
  });

  it('without a canary, the failure budget stops the fleet: with N = 1 and K = 1, one node fails, the others never start', async () => {
    desired('spcd-demo/service:crash', 'id: bad-k\nmaxConcurrent: 1\nfailureBudget: { maxFailed: 1 }\n');
    await waitFor(
      'one rolled back, two held for the budget',
      () => {
        const p = nodes.map(phase);
        return (
          p.filter((x) => x?.rollout === 'bad-k' && x.phase === 'rolled-back').length === 1 &&
          p.filter((x) => x?.rollout === 'bad-k' && x.reason === 'budget-exhausted').length === 2
        );
      },
      { timeoutMs: 90_000 },
    ).catch(explain);
    const failed = nodes.findIndex((n) => phase(n)?.phase === 'rolled-back');
    for (let i = 0; i < nodes.length; i++) {
      const c = (await inspect(svc(i)))!;
      expect(c.Config.Image).toBe('spcd-demo/service:1');
      expect(c.State.Running).toBe(true);
      // generation 1, or (the node that tried) 1 again after its rollback
      if (i !== failed) expect(c.Config.Labels['spcd.generation']).toBe('1');
    }
  });

  it('pause holds every node; resume (same id) lets the fleet finish, one at a time', async () => {
    desired('spcd-demo/service:2', 'id: good\nmaxConcurrent: 1\npaused: true\n');
    await waitFor(
      'all paused',
      () => nodes.every((n) => phase(n)?.rollout === 'good' && phase(n)?.phase === 'paused'),
      { timeoutMs: 60_000 },
    ).catch(explain);
    for (let i = 0; i < nodes.length; i++)
      expect((await inspect(svc(i)))!.Config.Image).toBe('spcd-demo/service:1');
    desired('spcd-demo/service:2', 'id: good\nmaxConcurrent: 1\npaused: false\n');
    await waitFor('all done', () => nodes.every((n) => phase(n)?.phase === 'done'), {
      timeoutMs: 90_000,
    }).catch(explain);
    for (let i = 0; i < nodes.length; i++) {
      const c = (await inspect(svc(i)))!;
      expect(c.Config.Image).toBe('spcd-demo/service:2');
      expect(c.State.Running).toBe(true);
    }
  });
});
