import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * A fleet writer (whoever may put the etcd desired key) against every node:
 * a desired document far over the YAML budget a node gives one load of its
 * own definitions (50,000 nodes), still well under etcd's value size. A real
 * spcd on a real etcd must refuse it with SPEC_TOO_LARGE, naming the key,
 * and keep what runs.
 */
const sb: Sandbox = sandbox('sec-fleet');
const svc = `${sb.instance}-svc`;
const PREFIX = `/spcd-sec-${process.pid}/`;
let cluster: EtcdCluster;
let spcd: SpcdProcess;

beforeAll(async () => {
  cluster = await EtcdCluster.start(1);
  writeSet(sb, 's.yaml', `set: s\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`);
  spcd = SpcdProcess.start(sb, [
    '--etcd-endpoints',
    cluster.endpoints().join(','),
    '--etcd-prefix',
    PREFIX,
    '--node-name',
    'compute-sec',
    // plaintext etcd on loopback, as the other fleet tests run it
    '--etcd-insecure',
  ]);
  await spcd.ready();
  await waitFor('svc running', async () => (await inspect(svc))?.State.Running, { timeoutMs: 60_000 });
}, 150_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await cluster?.stop();
});

describe('the fleet desired document is parsed under the YAML budget', () => {
  it('a document of 200,000 YAML nodes (600 KB) is refused with SPEC_TOO_LARGE and nothing changes', async () => {
    const started = (await inspect(svc))!.State.StartedAt;
    const admin = connectEtcd({ endpoints: cluster.endpoints() });
    try {
      const big = `[${Array.from({ length: 200_000 }, () => '0').join(',')}]`;
      await admin
        .put(`${PREFIX}desired`)
        .value(`images: { ${svc}: spcd-demo/service:2 }\nglobals: { filler: ${big} }\n`);
    } finally {
      admin.close();
    }
    const line = await waitFor(
      'the document refused',
      () => spcd.output.find((l) => l.includes('desired document invalid')),
      { timeoutMs: 30_000 },
    );
    const entry = JSON.parse(line) as { code: string; err: string };
    expect(entry.code).toBe('SPEC_TOO_LARGE');
    expect(entry.err).toBe(
      `etcd key ${PREFIX}desired: line 2: holds more YAML nodes than the 50000 allowed across the definitions of one load`,
    );
    const now = await inspect(svc);
    expect(now?.Config.Image).toBe('spcd-demo/service:1');
    expect(now?.State.StartedAt).toBe(started);
  });
});
