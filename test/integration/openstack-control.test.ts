/**
 * MariaDB, RabbitMQ, memcached, Keystone and Placement from
 * spcd-e2e/openstack:zed under a real
 * spcd (issue #12 part 2, container-sets-e2e/openstack/control.yaml,
 * docs/openstack-e2e.md). spcd renders the templates, runs the bootstrap
 * tasks (mariadb initialises its data folder and creates keystone's database;
 * keystone syncs its schema, makes its keys and bootstraps the admin user)
 * and starts the three services on the host network, bound to 127.0.0.1 on
 * non-default ports. Then a real client gets a token from Keystone.
 * Setup builds or reuses the image (a cold build takes minutes).
 */
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../e2e/libvirt-e2e-harness.js';
import { execIn } from '../support/containers.js';
import { REPO, sandbox, SpcdProcess, writeSet } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const BUILD_TIMEOUT_MS = 45 * 60_000;
const SET = join(REPO, 'container-sets-e2e', 'openstack', 'control.yaml');
const sb = sandbox('osctl');
const prefix = `osc${process.pid}_`;
const name = (svc: string): string => `${prefix}${svc}`;
let spcd: SpcdProcess | undefined;

beforeAll(async () => {
  try {
    await run('bash', [join(REPO, 'scripts/openstack/build-images.sh')], BUILD_TIMEOUT_MS);
  } catch (err) {
    throw new Error(
      `cannot build spcd-e2e/openstack:zed (see /var/cache/spcd-e2e/logs/openstack-zed.log): ${(err as Error).message}`,
    );
  }
  const root = join(sb.root, 'host');
  const dirs: [string, number, number][] = [
    ['mysql', 42434, 0o750],
    ['keystone/fernet-keys', 42425, 0o700],
    ['keystone/credential-keys', 42425, 0o700],
  ];
  for (const [dir, uid, mode] of dirs) {
    mkdirSync(join(root, dir), { recursive: true });
    chownSync(join(root, dir), uid, uid);
    chmodSync(join(root, dir), mode);
  }
  const text = readFileSync(SET, 'utf8')
    .split('/var/tmp/spcd-e2e-openstack')
    .join(root)
    .split('spcd_e2e_os_')
    .join(prefix)
    .replace(/spcd-e2e\.run: manual/g, `spcd-e2e.run: ${sb.instance}`);
  writeSet(sb, 'control.yaml', text);
  spcd = SpcdProcess.start(sb, ['--templates', join(REPO, 'templates'), '--gate-deadline', '600s']);
}, BUILD_TIMEOUT_MS + 60_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  rmSync(sb.root, { recursive: true, force: true });
}, 120_000);

describe('openstack control set under spcd', () => {
  it('brings up mariadb, rabbitmq, memcached, keystone and placement; keystone issues a token', async () => {
    const keystone = name('keystone');
    const token = await waitFor(
      'a token from keystone on 127.0.0.1:15000',
      async () => {
        // A failed bootstrap task ends the wait at once, with what spcd said.
        if (spcd?.logged('BOOTSTRAP_FAILED')) return { failed: spcd.output.slice(-40).join('\n') };
        const c = await inspect(keystone);
        if (!c?.State.Running) return undefined;
        const r = await execIn(c.Id, [
          'openstack',
          '--os-auth-url=http://127.0.0.1:15000/v3',
          '--os-username=admin',
          '--os-password=e2e-admin',
          '--os-project-name=admin',
          '--os-user-domain-name=Default',
          '--os-project-domain-name=Default',
          'token',
          'issue',
          '-f',
          'value',
          '-c',
          'id',
        ]);
        return r.exitCode === 0 ? { token: r.stdout.trim() } : undefined;
      },
      { timeoutMs: 900_000, intervalMs: 5000 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nspcd said:\n${spcd?.output.slice(-40).join('\n') ?? ''}`);
    });
    expect(token.failed, 'a bootstrap task failed').toBeUndefined();
    expect(token.token).toMatch(/^gAAAAA/);

    for (const svc of ['mariadb', 'rabbitmq', 'memcached', 'keystone', 'placement']) {
      const c = await inspect(name(svc));
      expect(c?.State.Running, svc).toBe(true);
      expect(c?.Config.Labels['spcd.instance']).toBe(sb.instance);
    }
    const mq = await inspect(name('rabbitmq'));
    const ping = await waitFor(
      'rabbitmq-diagnostics ping',
      async () => {
        const r = await execIn(mq?.Id ?? '', ['rabbitmq-diagnostics', '-q', 'ping'], { user: 'rabbitmq' });
        return r.exitCode === 0 ? r : undefined;
      },
      { timeoutMs: 240_000, intervalMs: 3000 },
    );
    expect(ping.exitCode).toBe(0);
    const mc = await inspect(name('memcached'));
    const version = await execIn(mc?.Id ?? '', [
      'bash',
      '-c',
      'exec 3<>/dev/tcp/127.0.0.1/11311; printf "version\\r\\n" >&3; head -n1 <&3',
    ]);
    expect(version.stdout).toMatch(/^VERSION 1\.6\./);
    const placement = await inspect(name('placement'));
    const root = await waitFor(
      'placement API on 127.0.0.1:18778',
      async () => {
        const r = await execIn(placement?.Id ?? '', ['curl', '-sf', 'http://127.0.0.1:18778/']);
        return r.exitCode === 0 ? r.stdout : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 3000 },
    );
    expect(JSON.parse(root)).toMatchObject({ versions: [{ id: 'v1.0', status: 'CURRENT' }] });
  }, 1_200_000);
});
