import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { phaseFromJson } from '../../agent/rollout/records.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * Two real spcd daemons (one container each) started with --etcd-endpoints
 * against a real 3-member etcd cluster: the operator's one put of the
 * desired key upgrades both, one at a time, and each reports `done`.
 */
const nodes = ['compute-a', 'compute-b'];
const sbs: Sandbox[] = nodes.map((_, i) => sandbox(`edm${i}`));
const svc = (i: number): string => `${sbs[i]!.instance}-svc`;
const daemons: SpcdProcess[] = [];
const PREFIX = `/spcd-${process.pid}/`;
let cluster: EtcdCluster;

beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
  nodes.forEach((node, i) => {
    writeSet(
      sbs[i]!,
      's.yaml',
      `set: s\ncontainers:\n${demoContainerYaml(svc(i), ['stop_grace_period: 1s'])}`,
    );
    daemons.push(
      SpcdProcess.start(sbs[i]!, [
        '--gate-deadline',
        '5s',
        '--etcd-endpoints',
        cluster.endpoints().join(','),
        '--etcd-insecure',
        '--etcd-prefix',
        PREFIX,
        '--node-name',
        node,
      ]),
    );
  });
  await Promise.all(daemons.map((d) => d.ready()));
  await waitFor(
    'every svc running',
    async () => (await Promise.all(nodes.map((_, i) => inspect(svc(i))))).every((c) => c?.State.Running),
    { timeoutMs: 60_000 },
  );
}, 150_000);

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  await Promise.all(sbs.map((sb) => cleanupInstance(sb.instance)));
  await cluster?.stop();
});

describe('spcd --etcd-endpoints', { timeout: 150_000 }, () => {
  it('upgrades every node when the desired key changes, and each reports done', async () => {
    const admin = connectEtcd({ endpoints: cluster.endpoints() });
    try {
      const images = nodes.map((_, i) => `${svc(i)}: spcd-demo/service:2`).join(', ');
      await admin
        .put(`${PREFIX}desired`)
        .value(`images: { ${images} }\nrollout: { id: up, maxConcurrent: 1 }\n`);
      await waitFor(
        'both nodes done',
        async () => {
          const all = await admin.getAll().prefix(`${PREFIX}nodes/`).strings();
          const phases = Object.values(all).map(phaseFromJson);
          return phases.filter((p) => p?.rollout === 'up' && p.phase === 'done').length === nodes.length;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      ).catch((err: unknown) => {
        const said = daemons.flatMap((d, i) =>
          d.output
            .filter((l) => /etcd|fleet|rollout|slot|phase/i.test(l))
            .slice(-8)
            .map((l) => `${nodes[i]}: ${l}`),
        );
        throw new Error(`${(err as Error).message}\n${said.join('\n')}`);
      });
      for (let i = 0; i < nodes.length; i++) {
        const c = (await inspect(svc(i)))!;
        expect(c.Config.Image).toBe('spcd-demo/service:2');
        expect(c.State.Running).toBe(true);
      }
      expect(await admin.getAll().prefix(`${PREFIX}queue/`).keys()).toEqual([]);
    } finally {
      admin.close();
    }
  });
});
