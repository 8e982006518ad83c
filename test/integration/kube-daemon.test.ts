import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { waitFor } from '../support/wait.js';

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

type Obj = {
  metadata: { annotations?: Record<string, string> };
  status?: { conditions?: { type: string; status: string }[] };
};

beforeAll(async () => {
  await server.start();
  server.put('nodes', null, { metadata: { name: NODE }, status: { conditions: [] } });
  writeSet(
    sb,
    'k.yaml',
    `set: k\ncontainers:\n  ${n('svc')}:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n`,
  );
  spcd = SpcdProcess.start(sb, [
    '--kubeconfig',
    server.kubeConfig(NS).path,
    '--node-name',
    NODE,
    '--kube-desired-configmap',
    'spcd-desired',
    '--fleet-slots',
    '1',
  ]);
  await spcd.ready();
  await waitFor('svc running', async () => (await inspect(n('svc')))?.State.Running);
});

afterAll(async () => {
  await spcd?.stop();
  await server.stop();
  await cleanupInstance(sb.instance);
});

describe('spcd in a cluster (in-test API server, real client)', () => {
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
});
