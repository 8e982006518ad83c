import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { phaseFromJson } from '../../agent/rollout/records.js';
import { call, openEvents, type EventsTap } from '../support/api-http.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * Attack: whoever writes the fleet channel (or reaches the API) asks a node
 * for an image from a registry the node's operator never allowed, to run it
 * as a super-privileged container. A real spcd with --image-policy allowing
 * only docker.io/spcd-demo, coordinating through a real etcd: the image is
 * refused with IMAGE_REFUSED and an `image-refused` event, the engine is
 * never asked to pull it, and the container keeps its image.
 */
const sb: Sandbox = sandbox('secimg');
const svc = `${sb.instance}-svc`;
const PREFIX = `/spcd-secimg-${process.pid}/`;
const NODE = 'compute-img';
/** A registry nobody runs: a pull would fail (IMAGE_PULL_FAILED), not be refused. */
const EVIL = '127.0.0.1:9/evil/rootshell:1';
let cluster: EtcdCluster;
let spcd: SpcdProcess;
let tap: EventsTap & { problems: string[] };

beforeAll(async () => {
  cluster = await EtcdCluster.start(1);
  writeSet(sb, 's.yaml', `set: s\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`);
  const policy = join(sb.root, 'image-policy.yaml');
  writeFileSync(policy, 'allow:\n  - docker.io/spcd-demo\n');
  spcd = SpcdProcess.start(sb, [
    '--image-policy',
    policy,
    '--etcd-endpoints',
    cluster.endpoints().join(','),
    '--etcd-insecure',
    '--etcd-prefix',
    PREFIX,
    '--node-name',
    NODE,
  ]);
  await spcd.ready();
  await waitFor('svc running', async () => (await inspect(svc))?.State.Running === true, {
    timeoutMs: 60_000,
  });
  tap = await openEvents(sb.socket);
}, 150_000);

afterAll(async () => {
  tap?.close();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await cluster?.stop();
});

const refusals = (): Record<string, unknown>[] =>
  tap.events.filter((e) => e.type === 'image-refused' && e.image === EVIL);
const pulls = (): Record<string, unknown>[] =>
  tap.events.filter((e) => e.type === 'pull-progress' && e.image === EVIL);

describe('the node-side image policy', { timeout: 150_000 }, () => {
  it('refuses an image from the fleet channel that the policy does not allow', async () => {
    const admin = connectEtcd({ endpoints: cluster.endpoints() });
    try {
      await admin.put(`${PREFIX}desired`).value(`images: { ${svc}: "${EVIL}" }\nrollout: { id: evil }\n`);
      const phase = await waitFor(
        'the node reports the pull refused',
        async () => {
          const p = phaseFromJson((await admin.get(`${PREFIX}nodes/${NODE}`).string()) ?? undefined);
          return p?.rollout === 'evil' && p.phase === 'pull-failed' ? p : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      expect(phase.reason).toBe('IMAGE_REFUSED');
      expect(phase.message).toContain('is under none of the allowed prefixes (docker.io/spcd-demo)');
    } finally {
      admin.close();
    }
    await waitFor('an image-refused event', () => refusals().length > 0, { timeoutMs: 10_000 });
    expect(pulls()).toEqual([]);
    expect((await inspect(svc))!.Config.Image).toBe('spcd-demo/service:1');
  });

  it('refuses the same image asked for through the local API', async () => {
    const a = await call(sb.socket, 'POST', `/v1/containers/${svc}/upgrade`, { image: EVIL });
    expect(a.status).toBe(403);
    expect(a.json()).toMatchObject({ code: 'IMAGE_REFUSED', details: { image: EVIL, container: svc } });
    expect(pulls()).toEqual([]);
    expect((await inspect(svc))!.Config.Image).toBe('spcd-demo/service:1');
  });

  it('refuses an image that a container set names', async () => {
    const image = '127.0.0.1:9/evil/fromset:1';
    const name = `${sb.instance}-fromset`;
    writeSet(
      sb,
      'evil.yaml',
      `set: evil\ncontainers:\n  ${name}:\n    image: ${image}\n    command: [sh]\n    network: none\n`,
    );
    spcd.child.kill('SIGHUP');
    await waitFor(
      'an image-refused event for the set',
      () => tap.events.some((e) => e.type === 'image-refused' && e.image === image),
      { timeoutMs: 30_000 },
    );
    const a = await call(sb.socket, 'GET', `/v1/containers/${name}`);
    expect(a.json()).toMatchObject({ lastError: { code: 'IMAGE_REFUSED' } });
    expect(tap.events.filter((e) => e.type === 'pull-progress' && e.image === image)).toEqual([]);
    expect(await inspect(name)).toBeUndefined();
  });
});
