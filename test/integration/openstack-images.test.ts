/**
 * Smoke test of the OpenStack image built from Debian's packages (issue #12,
 * docs/reference/openstack-test-images.md). Setup builds (or reuses, by input hash)
 * spcd-e2e/openstack:zed with scripts/openstack/build-images.sh; a cold build
 * takes minutes. Then, through Kolla's own kolla_start and a config.json:
 *   - the image carries Kolla's runtime files unchanged, dumb-init as
 *     entrypoint, kolla_start as command, Kolla's fixed uids;
 *   - mariadb: a KOLLA_BOOTSTRAP run initialises an empty data folder and
 *     exits 0; the service then answers `mysqladmin ping` on its unix socket
 *     and on 127.0.0.1:13306;
 *   - rabbitmq-server starts on 127.0.0.1 with non-default ports (epmd too);
 *   - keystone-manage, nova-manage, glance-manage and placement-manage print
 *     the versions the image's labels name.
 * Every container has its own network namespace (NetworkMode none: loopback
 * only) and is removed by id at the end.
 */
import { createHash } from 'node:crypto';
import { chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kv, run } from '../e2e/libvirt-e2e-harness.js';
import { execIn, logsOf, removeById, startContainer, waitExit } from '../support/containers.js';
import { REPO, sandbox } from '../support/daemon.js';
import { cleanupInstance, docker } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const IMAGE = 'spcd-e2e/openstack:zed';
const KOLLA = join(REPO, '..', 'shared', 'peers', 'kolla-2024.1');
const BUILD_TIMEOUT_MS = 45 * 60_000;
const DB_PASSWORD = 'smoke-root-secret';
/** RabbitMQ's ports, none the default (5672, 25672, 4369) nor in the CLI tools' range (dist + 10000). */
const AMQP_PORT = 16572;
const DIST_PORT = 26572;
const EPMD_PORT = 14369;
const LOOPBACK_DIST = '-kernel inet_dist_use_interface {127,0,0,1}';
const KOLLA_UIDS: Record<string, number> = {
  kolla: 42400,
  glance: 42415,
  keystone: 42425,
  qemu: 42427,
  mysql: 42434,
  neutron: 42435,
  nova: 42436,
  rabbitmq: 42439,
  memcached: 42457,
  placement: 42482,
};

const sb = sandbox('osimg');
const labels = { 'spcd.instance': sb.instance };
const ids: string[] = [];
let built: Record<string, string> = {};
let labelsOfImage: Record<string, string> = {};

/** A folder holding config.json and the files it names, for /var/lib/kolla/config_files. */
function configFolder(name: string, config: object, files: Record<string, string> = {}): string {
  const dir = join(sb.root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return dir;
}

/** Starts a container of the image through kolla_start (the image's own CMD). */
async function kolla(
  name: string,
  opts: { user: string; config: string; env?: string[]; binds?: string[] },
): Promise<string> {
  const id = await startContainer({
    name: `${sb.instance}-${name}`,
    image: IMAGE,
    labels,
    user: opts.user,
    env: ['KOLLA_CONFIG_STRATEGY=COPY_ALWAYS', ...(opts.env ?? [])],
    binds: [`${opts.config}:/var/lib/kolla/config_files:ro`, ...(opts.binds ?? [])],
    networkMode: 'none',
  });
  ids.push(id);
  return id;
}

const upstream = (debianVersion: string | undefined): string =>
  (debianVersion ?? '').replace(/^\d+:/, '').replace(/[-~+].*$/, '');

beforeAll(async () => {
  const t0 = Date.now();
  let out: string;
  try {
    out = (await run('bash', [join(REPO, 'scripts/openstack/build-images.sh')], BUILD_TIMEOUT_MS)).stdout;
  } catch (err) {
    throw new Error(
      `cannot build ${IMAGE} (debootstrap and apt need the Debian mirror; see /var/cache/spcd-e2e/logs/openstack-zed.log): ${(err as Error).message}`,
    );
  }
  const lines = out.split('\n').filter((l) => l.trim());
  built = kv(lines.find((l) => l.startsWith('image=')) ?? '');
  console.log(`openstack image: ${((Date.now() - t0) / 1000).toFixed(1)} s, ${lines.join(' | ')}`);
  const img = await docker().getImage(IMAGE).inspect();
  labelsOfImage = img.Config.Labels ?? {};
}, BUILD_TIMEOUT_MS + 60_000);

afterAll(async () => {
  await removeById(ids);
  await cleanupInstance(sb.instance);
  rmSync(sb.root, { recursive: true, force: true });
});

describe('spcd-e2e/openstack:zed', () => {
  it("carries Kolla's runtime files unchanged, dumb-init, kolla_start and Kolla's uids", async () => {
    expect(built.image).toBe(IMAGE);
    expect(built.source).toMatch(/^(built|cached-image)$/);
    const img = await docker().getImage(IMAGE).inspect();
    expect(img.Config.Entrypoint).toEqual(['dumb-init', '--single-child', '--']);
    expect(img.Config.Cmd).toEqual(['kolla_start']);
    expect(upstream(labelsOfImage['spcd-e2e.nova-version'])).toMatch(/^26\.2\./);

    const files: Record<string, string> = {
      'set_configs.py': '/usr/local/bin/kolla_set_configs',
      'start.sh': '/usr/local/bin/kolla_start',
      'copy_cacerts.sh': '/usr/local/bin/kolla_copy_cacerts',
      healthcheck_port: '/usr/local/bin/healthcheck_port',
      healthcheck_curl: '/usr/local/bin/healthcheck_curl',
      sudoers: '/etc/sudoers.d/kolla',
    };
    const script = [
      `sha256sum ${Object.values(files).join(' ')}`,
      `getent passwd ${Object.keys(KOLLA_UIDS).join(' ')}`,
      'stat -c "%a %U" /etc/sudoers.d/kolla',
    ].join('; ');
    const id = await startContainer({
      name: `${sb.instance}-contract`,
      image: IMAGE,
      labels,
      networkMode: 'none',
      cmd: ['bash', '-c', script],
    });
    ids.push(id);
    expect(await waitExit(id, 120_000)).toBe(0);
    const out = await logsOf(id);
    for (const [src, dest] of Object.entries(files)) {
      const want = createHash('sha256')
        .update(readFileSync(join(KOLLA, src)))
        .digest('hex');
      expect(out, dest).toContain(`${want}  ${dest}`);
    }
    for (const [user, uid] of Object.entries(KOLLA_UIDS)) {
      expect(out).toMatch(new RegExp(`^${user}:x:${uid}:${uid}:`, 'm'));
    }
    expect(out).toMatch(/^440 root$/m);
  }, 180_000);

  it('mariadb: KOLLA_BOOTSTRAP initialises the data folder, then mysqld answers on its socket and 127.0.0.1:13306', async () => {
    const cnf = [
      '[mysqld]',
      'bind-address = 127.0.0.1',
      'port = 13306',
      'socket = /run/mysqld/mysqld.sock',
      'datadir = /var/lib/mysql',
      'skip-name-resolve',
      '[client]',
      'socket = /run/mysqld/mysqld.sock',
      '',
    ].join('\n');
    const config = configFolder(
      'mariadb',
      {
        command: 'mysqld',
        config_files: [
          {
            source: '/var/lib/kolla/config_files/spcd.cnf',
            dest: '/etc/mysql/mariadb.conf.d/99-spcd.cnf',
            owner: 'mysql',
            perm: '0600',
          },
        ],
      },
      { 'spcd.cnf': cnf },
    );
    const data = join(sb.root, 'mysql-data');
    mkdirSync(data);
    chownSync(data, KOLLA_UIDS.mysql ?? 0, KOLLA_UIDS.mysql ?? 0);
    const binds = [`${data}:/var/lib/mysql`];

    const boot = await kolla('mariadb-bootstrap', {
      user: 'mysql',
      config,
      binds,
      env: ['KOLLA_BOOTSTRAP=', `DB_ROOT_PASSWORD=${DB_PASSWORD}`],
    });
    const code = await waitExit(boot, 240_000);
    expect(code, await logsOf(boot)).toBe(0);

    const db = await kolla('mariadb', { user: 'mysql', config, binds });
    const auth = ['-uroot', `-p${DB_PASSWORD}`];
    const ping = await waitFor(
      'mysqladmin ping on the unix socket',
      async () => {
        const r = await execIn(db, ['mysqladmin', '--socket=/run/mysqld/mysqld.sock', ...auth, 'ping']);
        return r.exitCode === 0 ? r.stdout : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    expect(ping).toContain('mysqld is alive');
    const tcp = await execIn(db, ['mysqladmin', '--protocol=tcp', '-h127.0.0.1', '-P13306', ...auth, 'ping']);
    expect(tcp.exitCode, tcp.stderr).toBe(0);
    const version = await execIn(db, ['mysql', ...auth, '-N', '-e', 'SELECT VERSION()']);
    expect(version.stdout).toMatch(/^10\.11\./);
    const listen = await execIn(db, ['ss', '-ltnH']);
    expect(listen.stdout).toMatch(/127\.0\.0\.1:13306\b/);
    expect((await docker().getContainer(db).inspect()).State.Running).toBe(true);
  }, 600_000);

  it('rabbitmq-server starts on 127.0.0.1 with non-default ports, epmd too', async () => {
    const config = configFolder(
      'rabbitmq',
      {
        command: 'rabbitmq-server',
        config_files: [
          {
            source: '/var/lib/kolla/config_files/erlang.cookie',
            dest: '/var/lib/rabbitmq/.erlang.cookie',
            owner: 'rabbitmq',
            perm: '0600',
          },
        ],
      },
      { 'erlang.cookie': 'SPCDSMOKETESTCOOKIE' },
    );
    const mq = await kolla('rabbitmq', {
      user: 'rabbitmq',
      config,
      env: [
        'RABBITMQ_NODENAME=rabbit@localhost',
        'RABBITMQ_NODE_IP_ADDRESS=127.0.0.1',
        `RABBITMQ_NODE_PORT=${AMQP_PORT}`,
        `RABBITMQ_DIST_PORT=${DIST_PORT}`,
        `RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=${LOOPBACK_DIST}`,
        `RABBITMQ_CTL_ERL_ARGS=${LOOPBACK_DIST}`,
        'ERL_EPMD_ADDRESS=127.0.0.1',
        `ERL_EPMD_PORT=${EPMD_PORT}`,
      ],
    });
    await waitFor(
      'rabbitmq-diagnostics ping',
      async () =>
        (await execIn(mq, ['rabbitmq-diagnostics', '-q', 'ping'], { user: 'rabbitmq' })).exitCode === 0,
      { timeoutMs: 240_000, intervalMs: 2000 },
    );
    // The AMQP listener opens after the node answers: wait for it, then look at every listener.
    const listen = await waitFor(
      `AMQP listener on 127.0.0.1:${AMQP_PORT}`,
      async () => {
        const out = (await execIn(mq, ['ss', '-ltnH'])).stdout;
        return new RegExp(`127\\.0\\.0\\.1:${AMQP_PORT}\\b`).test(out) ? out : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    expect(listen).toMatch(new RegExp(`127\\.0\\.0\\.1:${DIST_PORT}\\b`));
    expect(listen).toMatch(new RegExp(`127\\.0\\.0\\.1:${EPMD_PORT}\\b`));
    const wide = new RegExp(
      `(0\\.0\\.0\\.0|\\*|\\[::\\]):(${AMQP_PORT}|${DIST_PORT}|${EPMD_PORT}|5672|4369|25672)\\b`,
    );
    expect(listen).not.toMatch(wide);
    const status = await execIn(mq, ['rabbitmq-diagnostics', '-q', 'listeners'], { user: 'rabbitmq' });
    expect(status.stdout).toContain(`127.0.0.1, port: ${AMQP_PORT}`);
  }, 400_000);

  it('keystone-, nova-, glance- and placement-manage print their versions through kolla_start', async () => {
    const tools: [string, string, string][] = [
      ['keystone', 'keystone-manage', 'spcd-e2e.keystone-version'],
      ['nova', 'nova-manage', 'spcd-e2e.nova-version'],
      ['glance', 'glance-manage', 'spcd-e2e.glance-version'],
      ['placement', 'placement-manage', 'spcd-e2e.placement-version'],
    ];
    const started = await Promise.all(
      tools.map(async ([user, tool, label]) => {
        const config = configFolder(`${tool}-version`, { command: `${tool} --version`, config_files: [] });
        return { tool, label, id: await kolla(`${tool}-version`, { user, config }) };
      }),
    );
    for (const { tool, label, id } of started) {
      const code = await waitExit(id, 180_000);
      const out = await logsOf(id);
      expect(code, out).toBe(0);
      const want = upstream(labelsOfImage[label]);
      expect(want, label).toMatch(/^\d+\.\d+\.\d+$/);
      expect(out).toContain(`Running command: '${tool} --version'`);
      expect(out).toMatch(new RegExp(`^${want.replace(/\./g, '\\.')}\\s*$`, 'm'));
    }
  }, 400_000);
});
