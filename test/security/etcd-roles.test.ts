import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EtcdPermissionDeniedError } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { EtcdRolloutBackend } from '../../agent/etcd/rollout-backend.js';
import { createLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import { phaseFromJson } from '../../agent/rollout/records.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { enableFleetAuth, type FleetAuth } from '../support/etcd-auth.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * Attack: a node's etcd credentials are used (a compromised compute host) to
 * write the fleet's desired document, so every node runs what it says, or to
 * write another node's keys (its phase, a slot in its name). A real etcd with
 * authentication on and the roles docs/explanation/fleet-over-etcd.md gives: a real spcd runs its
 * rollout with only its node role, and that role's credentials, through
 * spcd's own client, are refused the desired key and the other node's keys.
 * And: spcd refuses plaintext etcd unless --etcd-insecure says so.
 */
const PREFIX = `/spcd-secroles-${process.pid}/`;
const NODES = ['node-a', 'node-b'];
const sb: Sandbox = sandbox('secroles');
const svc = `${sb.instance}-svc`;
const log = createLogger({ level: 'silent' });
let dir: string;
let cluster: EtcdCluster;
let auth: FleetAuth;
let spcd: SpcdProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-secroles-'));
  cluster = await EtcdCluster.start(1);
  auth = await enableFleetAuth(cluster.endpoints(), PREFIX, NODES, dir);
}, 120_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const as = (u: { user: string; passwordFile: string }) =>
  connectEtcd({ endpoints: cluster.endpoints(), user: u.user, passwordFile: u.passwordFile });

describe('etcd roles for the fleet', { timeout: 150_000 }, () => {
  it('runs a rollout on a node with only its node role', async () => {
    writeSet(sb, 's.yaml', `set: s\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`);
    const a = auth.nodes['node-a']!;
    spcd = SpcdProcess.start(sb, [
      '--etcd-endpoints',
      cluster.endpoints().join(','),
      '--etcd-insecure',
      '--etcd-user',
      a.user,
      '--etcd-password-file',
      a.passwordFile,
      '--etcd-prefix',
      PREFIX,
      '--node-name',
      'node-a',
    ]);
    await spcd.ready();
    await waitFor('svc running', async () => (await inspect(svc))?.State.Running === true, {
      timeoutMs: 60_000,
    });
    const writer = as(auth.writer);
    try {
      await writer
        .put(`${PREFIX}desired`)
        .value(`images: { ${svc}: spcd-demo/service:2 }\nrollout: { id: r1, maxConcurrent: 1 }\n`);
      await waitFor(
        'node-a done',
        async () => {
          const p = phaseFromJson((await writer.get(`${PREFIX}nodes/node-a`).string()) ?? undefined);
          return p?.rollout === 'r1' && p.phase === 'done';
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      ).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${spcd!.output.slice(-15).join('\n')}`);
      });
    } finally {
      writer.close();
    }
    expect((await inspect(svc))!.Config.Image).toBe('spcd-demo/service:2');
  });

  it("refuses a node's credentials the desired key and another node's keys", async () => {
    const client = as(auth.nodes['node-a']!);
    // node-a's credentials in a backend that claims to be node-b
    const forged = new EtcdRolloutBackend({
      client,
      prefix: PREFIX,
      node: 'node-b',
      slotTtlSeconds: 10,
      clock: systemClock,
      log,
    });
    try {
      await expect(client.put(`${PREFIX}desired`).value('images: { x: evil.example/x:1 }\n')).rejects.toThrow(
        EtcdPermissionDeniedError,
      );
      await expect(
        forged.writePhase({ node: 'node-b', rollout: 'r1', phase: 'done', since: 0 }),
      ).rejects.toMatchObject({ code: 'ETCD_PERMISSION_DENIED' });
      const ac = new AbortController();
      await expect(forged.withSlot(1, ac.signal, async () => 'held')).rejects.toMatchObject({
        code: 'ETCD_PERMISSION_DENIED',
      });
      // node-a's own key is still writable: the refusals are by key, not a dead connection
      expect(await client.get(`${PREFIX}nodes/node-a`).string()).toContain('"node":"node-a"');
    } finally {
      await forged.close();
      client.close();
    }
  });

  it('refuses plaintext etcd endpoints without --etcd-insecure', async () => {
    const other = sandbox('secplain');
    const p = SpcdProcess.start(other, [
      '--etcd-endpoints',
      cluster.endpoints().join(','),
      '--node-name',
      'n',
    ]);
    expect(await p.exitWithin(20_000)).toBe(2);
    expect(p.output.join('\n')).toMatch(
      /spcd: --etcd-endpoints: 'http:\/\/127\.0\.0\.1:[0-9]+' is plaintext: .* or pass --etcd-insecure/,
    );
  });
});
