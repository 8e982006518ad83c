/**
 * The OpenStack control plane from spcd-e2e/openstack:zed under a real spcd
 * (issue #12 part 2, container-sets-e2e/openstack/control.yaml,
 * docs/reference/openstack-test-images.md): MariaDB, RabbitMQ, memcached, Keystone, Placement,
 * Glance, nova-api, nova-conductor and nova-scheduler. spcd renders the
 * templates and runs the bootstrap tasks (MariaDB's data folder and databases;
 * each API's schema; Keystone's keys and admin; the cells; each service's
 * Keystone user, service and endpoints; the flavor m1.spcd), then starts the
 * services on the host network, bound to 127.0.0.1 on ports of the test's own
 * (test/support/openstack-control.ts). Every client runs in a container of
 * the set and talks to 127.0.0.1 only.
 * Setup builds or reuses the image (a cold build takes minutes).
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { run } from '../e2e/libvirt-e2e-harness.js';
import { execIn } from '../support/containers.js';
import { REPO, sandbox, SpcdProcess } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { freePorts, osc, writeControlSet, type ControlSet } from '../support/openstack-control.js';
import { waitFor } from '../support/wait.js';

const BUILD_TIMEOUT_MS = 45 * 60_000;
const sb = sandbox('osctl');
let spcd: SpcdProcess | undefined;
let set: ControlSet;
let started = 0;

beforeAll(async () => {
  try {
    await run('bash', [join(REPO, 'scripts/openstack/build-images.sh')], BUILD_TIMEOUT_MS);
  } catch (err) {
    throw new Error(
      `cannot build spcd-e2e/openstack:zed (see /var/cache/spcd-e2e/logs/openstack-zed.log): ${(err as Error).message}`,
    );
  }
  set = writeControlSet(sb, { prefix: `osc${process.pid}_`, ports: await freePorts() });
  started = Date.now();
  spcd = SpcdProcess.start(sb, ['--templates', join(REPO, 'templates'), '--gate-deadline', '900s']);
}, BUILD_TIMEOUT_MS + 60_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  rmSync(sb.root, { recursive: true, force: true });
}, 120_000);

/** The output of every bootstrap task that failed, from spcd's state file. */
function failedTasks(): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.output === 'string' && 'exitCode' in o && o.exitCode !== 0) {
        out.push(`${String(o.name)} (exit ${String(o.exitCode)}):\n${o.output.slice(-3000)}`);
      } else Object.values(o).forEach(walk);
    }
  };
  try {
    walk(JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')));
  } catch {
    out.push('(no state file)');
  }
  return out;
}

/** Runs probe until it answers; a failed bootstrap task ends the wait at once, with what spcd said. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const said = (): string =>
    `spcd said:\n${spcd?.output.slice(-40).join('\n') ?? ''}\nfailed tasks:\n${failedTasks().join('\n')}`;
  const r = await waitFor(
    what,
    async () => {
      if (spcd?.logged('BOOTSTRAP_FAILED')) return { failed: true as const };
      const v = await probe();
      return v === undefined ? undefined : { value: v };
    },
    { timeoutMs, intervalMs: 5000 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${said()}`);
  });
  if (!('value' in r)) throw new Error(`a bootstrap task failed; ${said()}`);
  return r.value as T;
}

async function idOf(svc: string): Promise<string> {
  const c = await inspect(set.name(svc));
  if (!c?.State.Running) throw new Error(`${set.name(svc)} does not run`);
  return c.Id;
}

async function json<T>(id: string, args: string[]): Promise<T> {
  const r = await osc(id, set.ports, [...args, '-f', 'json']);
  if (r.exitCode !== 0) throw new Error(`openstack ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

describe('openstack control set under spcd', () => {
  inOrder();
  it('brings up the infrastructure and keystone; keystone issues a token', async () => {
    const token = await until(
      'a token from keystone',
      async () => {
        const c = await inspect(set.name('keystone'));
        if (!c?.State.Running) return undefined;
        const r = await osc(c.Id, set.ports, ['token', 'issue', '-f', 'value', '-c', 'id']);
        return r.exitCode === 0 ? r.stdout.trim() : undefined;
      },
      900_000,
    );
    expect(token).toMatch(/^gAAAAA/);

    const ping = await until(
      'rabbitmq-diagnostics ping',
      async () => {
        const r = await execIn(await idOf('rabbitmq'), ['rabbitmq-diagnostics', '-q', 'ping'], {
          user: 'rabbitmq',
        });
        return r.exitCode === 0 ? r : undefined;
      },
      240_000,
    );
    expect(ping.exitCode).toBe(0);
    const version = await execIn(await idOf('memcached'), [
      'bash',
      '-c',
      `exec 3<>/dev/tcp/127.0.0.1/${set.ports.memcached}; printf "version\\r\\n" >&3; head -n1 <&3`,
    ]);
    expect(version.stdout).toMatch(/^VERSION 1\.6\./);
  }, 1_200_000);

  it('starts placement, glance, nova-api, nova-conductor and nova-scheduler, all under spcd', async () => {
    const services = ['mariadb', 'rabbitmq', 'memcached', 'keystone', 'placement', 'glance_api'];
    const nova = ['nova_api', 'nova_conductor', 'nova_scheduler'];
    await until(
      'every container of the set running',
      async () => {
        for (const svc of [...services, ...nova])
          if (!(await inspect(set.name(svc)))?.State.Running) return undefined;
        return true;
      },
      1_200_000,
    );
    for (const svc of [...services, ...nova]) {
      expect((await inspect(set.name(svc)))?.Config.Labels['spcd.instance'], svc).toBe(sb.instance);
    }
    const root = await until(
      'placement API',
      async () => {
        const r = await execIn(await idOf('placement'), [
          'curl',
          '-sf',
          `http://127.0.0.1:${set.ports.placement}/`,
        ]);
        return r.exitCode === 0 ? r.stdout : undefined;
      },
      300_000,
    );
    expect(JSON.parse(root)).toMatchObject({ versions: [{ id: 'v1.0', status: 'CURRENT' }] });
  }, 1_500_000);

  it("registers the services in keystone's catalog from bootstrap tasks, idempotently", async () => {
    const keystone = await idOf('keystone');
    const want: [string, string, string][] = [
      ['placement', 'placement', `http://127.0.0.1:${set.ports.placement}`],
      ['glance', 'image', `http://127.0.0.1:${set.ports.glance}`],
      ['nova', 'compute', `http://127.0.0.1:${set.ports.nova_api}/v2.1`],
    ];
    const services = await json<{ Name: string; Type: string }[]>(keystone, ['service', 'list']);
    expect(services.map((x) => `${x.Name} ${x.Type}`).sort()).toEqual(
      ['keystone identity', ...want.map(([n, t]) => `${n} ${t}`)].sort(),
    );
    const endpoints = await json<
      { 'Service Name': string; Interface: string; URL: string; Region: string }[]
    >(keystone, ['endpoint', 'list']);
    for (const [n, , url] of want) {
      expect(
        endpoints
          .filter((e) => e['Service Name'] === n)
          .map((e) => `${e.Region} ${e.Interface} ${e.URL}`)
          .sort(),
        n,
      ).toEqual([`RegionOne admin ${url}`, `RegionOne internal ${url}`, `RegionOne public ${url}`]);
    }
    for (const user of ['placement', 'glance', 'nova', 'neutron']) {
      const roles = await json<{ Role: string; Project: string }[]>(keystone, [
        'role',
        'assignment',
        'list',
        '--names',
        '--project',
        'service',
        '--user',
        user,
      ]);
      expect(roles, user).toMatchObject([{ Role: 'admin', Project: 'service@Default' }]);
    }
    // The task again, as an upgrade's bootstrap runs it: it succeeds and creates nothing.
    const again = await execIn(
      await idOf('nova_api'),
      ['python3', '/etc/nova/spcd-register.py', '/etc/nova/spcd-register.json'],
      { user: 'nova', timeoutMs: 180_000 },
    );
    expect(again.exitCode, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).not.toContain('created');
    expect(await json<unknown[]>(keystone, ['endpoint', 'list'])).toHaveLength(endpoints.length);
  }, 600_000);

  it('glance stores a raw image in its bind-mounted folder', async () => {
    const glance = await idOf('glance_api');
    const made = await execIn(glance, ['bash', '-c', 'head -c 1048576 /dev/zero > /tmp/spcd-e2e.raw']);
    expect(made.exitCode).toBe(0);
    const image = await json<{ id: string; status: string }>(glance, [
      'image',
      'create',
      '--disk-format',
      'raw',
      '--container-format',
      'bare',
      '--file',
      '/tmp/spcd-e2e.raw',
      `spcd-e2e-${process.pid}`,
    ]);
    const shown = await until(
      'the image active',
      async () => {
        const s = await json<{ status: string; size: number }>(glance, ['image', 'show', image.id]);
        return s.status === 'active' ? s : undefined;
      },
      120_000,
    );
    expect(shown.size).toBe(1048576);
    const stored = await execIn(glance, ['stat', '-c', '%s', `/var/lib/glance/store/images/${image.id}`]);
    expect(stored.stdout.trim()).toBe('1048576');
  }, 600_000);

  it('nova: conductor and scheduler up, cell0 and cell1 mapped, flavor m1.spcd', async () => {
    const api = await idOf('nova_api');
    const compute = await until(
      'nova-conductor and nova-scheduler up',
      async () => {
        const r = await osc(api, set.ports, ['compute', 'service', 'list', '-f', 'json']);
        if (r.exitCode !== 0) return undefined;
        const list = JSON.parse(r.stdout) as { Binary: string; State: string; Status: string }[];
        const up = (b: string): boolean => list.some((s) => s.Binary === b && s.State === 'up');
        return up('nova-conductor') && up('nova-scheduler') ? list : undefined;
      },
      600_000,
    );
    expect(compute.map((s) => `${s.Binary} ${s.Status} ${s.State}`).sort()).toEqual([
      'nova-conductor enabled up',
      'nova-scheduler enabled up',
    ]);
    const cells = await execIn(api, ['nova-manage', 'cell_v2', 'list_cells'], {
      user: 'nova',
      timeoutMs: 180_000,
    });
    expect(cells.exitCode, cells.stderr).toBe(0);
    const rows = cells.stdout
      .split('\n')
      .filter((l) => l.startsWith('|'))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    const db = `mysql+pymysql://nova:****@127.0.0.1:${set.ports.mariadb}`;
    expect(rows.slice(1).map((r) => [r[0], r[2], r[3], r[4]])).toEqual([
      ['cell0', 'none:/', `${db}/nova_cell0`, 'False'],
      ['cell1', `rabbit://guest:****@127.0.0.1:${set.ports.amqp}/`, `${db}/nova`, 'False'],
    ]);
    const flavor = await json<{ name: string; ram: number; vcpus: number; disk: number }>(api, [
      'flavor',
      'show',
      'm1.spcd',
    ]);
    expect(flavor).toMatchObject({ name: 'm1.spcd', ram: 128, vcpus: 1, disk: 0 });
    // The flavors task again, as an upgrade's bootstrap runs it: nothing new.
    const again = await execIn(
      await idOf('nova_scheduler'),
      ['python3', '/etc/nova/spcd-register.py', '/etc/nova/spcd-register.json', 'flavors'],
      { user: 'nova', timeoutMs: 180_000 },
    );
    expect(again.exitCode, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('flavor m1.spcd exists');
    expect((await json<{ Name: string }[]>(api, ['flavor', 'list'])).map((f) => f.Name)).toEqual(['m1.spcd']);
    console.log(`openstack control set: bring-up ${((Date.now() - started) / 1000).toFixed(0)} s to here`);
  }, 900_000);
});
