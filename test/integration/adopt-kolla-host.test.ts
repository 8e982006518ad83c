import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContainerStatus, PlanView, SetStatus, StatusDocument } from '../../agent/api/types.js';
import { runSpcctl } from '../support/cli-run.js';
import { REPO, sandbox, SpcdProcess, writeSet } from '../support/daemon.js';
import { docker } from '../support/docker.js';
import { systemdBoxRun } from '../support/systemd-box.js';
import { waitFor } from '../support/wait.js';

/**
 * A compute host as kolla-ansible 2024.1 builds it, built here by
 * kolla-ansible's own kolla_container module (the peer's code, run from
 * ../shared/peers, with Debian's ansible-core, python3-docker and
 * python3-dbus) inside a container that runs systemd as PID 1 and holds the
 * host's Docker socket: the containers land on the host's engine, each with
 * its unit kolla-<name>-container.service in that systemd. The parameters
 * are the nova-cell, neutron and openvswitch roles' (volumes, namespaces,
 * environment), with four changes this machine needs, each said where it is
 * made: names and named volumes carry this test's instance (the engine is
 * shared), the image is a local one with Kolla's runtime (kolla_start), the
 * config folder is this test's, and `privileged: true` becomes an explicit
 * capability list (this VM cannot start --privileged).
 *
 * spcd then scans them, the operator's set is the scan, the plan says adopt
 * for each and nothing else, and each is adopted on the operator's word: the
 * same container id, the same State.StartedAt, no restart, also after a
 * SIGKILL of spcd and a new spcd.
 */
const run = promisify(execFile);
const DOCKER = '/usr/bin/docker';
const IMAGE = 'spcd-e2e/kolla-ansible-host:bookworm';
const KOLLA_IMAGE = 'spcd-e2e/kolla-runtime:bookworm';
const PEER = join(REPO, '..', 'shared', 'peers', 'kolla-ansible-2024.1');
const sb = sandbox('adopt-kolla');
const box = `spcd-${sb.instance}-host`;
const n = (kolla: string): string => `${sb.instance}-${kolla}`;
const ETC_KOLLA = join(sb.root, 'etc', 'kolla');
const SET = 'kolla';
let spcd: SpcdProcess | undefined;

/** Every capability Docker 20.10 knows but SYS_RESOURCE, which this VM's bounding set lacks: what `privileged: true` becomes here. */
const CAPS = [
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'AUDIT_WRITE',
  'BLOCK_SUSPEND',

  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'IPC_LOCK',
  'IPC_OWNER',
  'KILL',
  'LEASE',
  'LINUX_IMMUTABLE',
  'MAC_ADMIN',
  'MAC_OVERRIDE',
  'MKNOD',
  'NET_ADMIN',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_RAW',

  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYSLOG',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_CHROOT',
  'SYS_MODULE',
  'SYS_NICE',
  'SYS_PACCT',
  'SYS_PTRACE',
  'SYS_RAWIO',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'WAKE_ALARM',
];

/** kolla-ansible's docker_common_options (group_vars/all.yml), as the roles pass them. */
const COMMON = {
  environment: { KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS' },
  restart_policy: 'unless-stopped',
  restart_retries: '10',
  graceful_timeout: '60',
  client_timeout: '120',
  container_engine: 'docker',
};

interface KollaService {
  readonly kolla: string;
  readonly folder: string;
  readonly params: Record<string, unknown>;
}

/** The roles' parameters (nova-cell, neutron, openvswitch defaults), with this machine's changes. */
const SERVICES: readonly KollaService[] = [
  {
    kolla: 'nova_libvirt',
    folder: 'nova-libvirt',
    params: {
      pid_mode: 'host',
      cgroupns_mode: 'host',
      volumes: [
        '/etc/localtime:/etc/localtime:ro',
        '/lib/modules:/lib/modules:ro',
        '/run:/run:shared',
        '/dev:/dev',
        '/sys/fs/cgroup:/sys/fs/cgroup',
        `${n('kolla_logs')}:/var/log/kolla/`,
        `${n('libvirtd')}:/var/lib/libvirt`,
        `${n('nova_compute')}:/var/lib/nova/`,
        `${n('nova_libvirt_qemu')}:/etc/libvirt/qemu`,
      ],
    },
  },
  {
    kolla: 'nova_compute',
    folder: 'nova-compute',
    params: {
      ipc_mode: 'host',
      environment: { LIBGUESTFS_BACKEND: 'direct' },
      volumes: [
        '/etc/localtime:/etc/localtime:ro',
        '/lib/modules:/lib/modules:ro',
        '/run:/run:shared',
        '/dev:/dev',
        `${n('kolla_logs')}:/var/log/kolla/`,
        `${n('libvirtd')}:/var/lib/libvirt`,
        `${n('nova_compute')}:/var/lib/nova/`,
      ],
    },
  },
  {
    kolla: 'neutron_openvswitch_agent',
    folder: 'neutron-openvswitch-agent',
    params: {
      volumes: [
        '/etc/localtime:/etc/localtime:ro',
        '/lib/modules:/lib/modules:ro',
        '/run/openvswitch:/run/openvswitch:shared',
        `${n('kolla_logs')}:/var/log/kolla/`,
      ],
    },
  },
];

const inBox = async (script: string, timeout = 120_000): Promise<string> =>
  (await run(DOCKER, ['exec', box, 'sh', '-c', script], { encoding: 'utf8', timeout })).stdout;

/** kolla_container, as a role's handler calls it (action recreate_or_restart_container). */
async function kollaContainer(s: KollaService): Promise<string> {
  const { environment, volumes, ...rest } = s.params as {
    environment?: Record<string, string>;
    volumes: string[];
  };
  const args = {
    action: 'recreate_or_restart_container',
    common_options: COMMON,
    name: n(s.kolla),
    image: KOLLA_IMAGE,
    // privileged: true in the roles; this VM cannot start it (see CAPS)
    privileged: false,
    cap_add: CAPS,
    ...(environment ? { environment } : {}),
    ...rest,
    volumes: [`${join(ETC_KOLLA, s.folder)}/:/var/lib/kolla/config_files/:ro`, ...volumes],
    dimensions: {},
  };
  const env = `ANSIBLE_LIBRARY=${PEER}/library ANSIBLE_MODULE_UTILS=${PEER}/module_utils ANSIBLE_NOCOLOR=1`;
  // A failed module exits non-zero: its output (the module's message) is what the test shows.
  return inBox(
    `${env} ansible localhost -c local -m kolla_container -a '${JSON.stringify(args)}' 2>&1 || true`,
  );
}

interface Running {
  readonly id: string;
  readonly startedAt: string;
  readonly restartCount: number;
  readonly running: boolean;
}

async function running(name: string): Promise<Running> {
  const i = (await docker().getContainer(name).inspect()) as {
    Id: string;
    RestartCount: number;
    State: { StartedAt: string; Running: boolean };
  };
  return { id: i.Id, startedAt: i.State.StartedAt, restartCount: i.RestartCount, running: i.State.Running };
}

function allContainers(sets: readonly SetStatus[]): ContainerStatus[] {
  return sets.flatMap((s) => [...s.containers, ...allContainers(s.sets)]);
}

/** The status once a listing after the adoptions shows every container (the next pass lists them). */
async function statusOnceListed(): Promise<Map<string, ContainerStatus>> {
  let containers = new Map<string, ContainerStatus>();
  await waitFor(
    'a listing shows the adopted containers',
    async () => {
      const status = JSON.parse((await cli('status', '-o', 'json')).out) as StatusDocument;
      containers = new Map(allContainers(status.sets).map((c) => [c.name, c]));
      return SERVICES.every((s) => containers.get(n(s.kolla))?.containerId);
    },
    { timeoutMs: 15_000 },
  );
  return containers;
}

const cli = async (...args: string[]): Promise<{ code: number; out: string; err: string }> =>
  runSpcctl(['--socket', sb.socket, ...args], {});

beforeAll(async () => {
  execFileSync('bash', [join(REPO, 'scripts/kolla-ansible-host/build-image.sh')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (const s of SERVICES) {
    mkdirSync(join(ETC_KOLLA, s.folder), { recursive: true });
    // Kolla's config.json; the service's own command would need a control plane: a long sleep stands in.
    writeFileSync(
      join(ETC_KOLLA, s.folder, 'config.json'),
      JSON.stringify({ command: 'sleep infinity', config_files: [] }, null, 4),
    );
  }
  execFileSync(
    DOCKER,
    systemdBoxRun(
      box,
      [
        `${DOCKER}:/usr/bin/docker:ro`,
        `${PEER}:${PEER}:ro`,
        // the config folders at the same path as on the host: the engine resolves bind sources there
        `${sb.root}:${sb.root}`,
      ],
      IMAGE,
    ),
  );
  await waitFor(
    'systemd up',
    async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
    {
      timeoutMs: 60_000,
    },
  );
  for (const s of SERVICES) {
    const out = await kollaContainer(s);
    expect(out, out).toMatch(/CHANGED/);
  }
}, 900_000);

afterAll(async () => {
  await spcd?.stop();
  await run(DOCKER, ['rm', '-f', box]).catch(() => undefined);
  for (const s of SERVICES)
    await docker()
      .getContainer(n(s.kolla))
      .remove({ force: true })
      .catch(() => undefined);
  for (const v of ['kolla_logs', 'libvirtd', 'nova_compute', 'nova_libvirt_qemu'])
    await docker()
      .getVolume(n(v))
      .remove()
      .catch(() => undefined);
}, 120_000);

describe('a host kolla-ansible built, adopted by spcd with no restart', () => {
  const before = new Map<string, Running>();

  it("has kolla-ansible's containers running, each under its systemd unit", async () => {
    for (const s of SERVICES) {
      const r = await running(n(s.kolla));
      expect(r.running).toBe(true);
      before.set(s.kolla, r);
      expect((await inBox(`systemctl is-active kolla-${n(s.kolla)}-container.service || true`)).trim()).toBe(
        'active',
      );
    }
  });

  it('scans them into a set whose plan says adopt for each, and nothing else', async () => {
    writeSet(sb, 'empty.yaml', 'set: empty\ncontainers: {}\n');
    spcd = SpcdProcess.start(sb);
    await spcd.ready(60_000);
    const only = SERVICES.map((s) => n(s.kolla)).join(',');
    const scan = await cli('adopt', 'scan', SET, '--only', only);
    expect(scan.code, scan.err).toBe(0);
    for (const s of SERVICES) expect(scan.out).toContain(`${n(s.kolla)}:`);
    writeFileSync(join(sb.setsDir, 'kolla.yaml'), scan.out);
    const plan = await cli('plan', '-o', 'json');
    const view = JSON.parse(plan.out) as PlanView;
    expect(
      view.items.map((i) => [i.container, i.action, i.reason.startsWith('blocked')]),
      plan.out + scan.out,
    ).toEqual(expect.arrayContaining(SERVICES.map((s) => [n(s.kolla), 'adopt', false])));
    expect(view.items.filter((i) => i.action !== 'adopt')).toEqual([]);
    const reload = await cli('reload', '--wait');
    expect(reload.code, reload.err + reload.out).toBe(0);
  });

  it("retires kolla-ansible's units with no container stopped: a drop-in first, then disable --now", async () => {
    for (const s of SERVICES) {
      const unit = `kolla-${n(s.kolla)}-container.service`;
      // Without the drop-in, stopping the unit runs its ExecStop (docker stop): the drop-in empties it,
      // kills the attached CLI with SIGKILL (which it cannot forward) and ends Restart=always.
      await inBox(
        [
          `mkdir -p /etc/systemd/system/${unit}.d`,
          `printf '[Service]\\nExecStop=\\nKillSignal=SIGKILL\\nRestart=no\\n' > /etc/systemd/system/${unit}.d/retire.conf`,
          'systemctl daemon-reload',
          `systemctl disable --now ${unit}`,
          // the SIGKILL leaves the unit failed (result: signal); Restart=no keeps it down
          `systemctl reset-failed ${unit}`,
        ].join(' && '),
      );
      expect((await inBox(`systemctl is-active ${unit} || true`)).trim()).toBe('inactive');
      expect((await inBox(`systemctl is-enabled ${unit} || true`)).trim()).toBe('disabled');
      expect((await inBox(`systemctl show -p ExecStop --value ${unit}`)).trim()).toBe('');
    }
    // A reboot of the host: systemd shuts down and boots again; nothing starts or stops the old way.
    await run(DOCKER, ['restart', box], { timeout: 120_000 });
    await waitFor(
      'systemd up again',
      async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
      {
        timeoutMs: 60_000,
      },
    );
    for (const s of SERVICES)
      expect((await inBox(`systemctl is-active kolla-${n(s.kolla)}-container.service || true`)).trim()).toBe(
        'inactive',
      );
    // Each container runs on as it was, with no supervisor until spcd adopts it.
    for (const s of SERVICES) expect(await running(n(s.kolla))).toEqual(before.get(s.kolla));
  });

  it("adopts each on the operator's word: generation 1, the same id and StartedAt", async () => {
    for (const s of SERVICES) {
      const r = await cli('adopt', 'apply', n(s.kolla), '--wait');
      expect(r.code, r.err + r.out).toBe(0);
    }
    const containers = await statusOnceListed();
    for (const s of SERVICES) {
      const now = await running(n(s.kolla));
      expect(now).toEqual(before.get(s.kolla));
      expect(containers.get(n(s.kolla))).toMatchObject({
        generation: 1,
        containerId: now.id,
        state: 'running',
      });
    }
  });

  it('keeps them after a SIGKILL of spcd and a new spcd, still without a restart', async () => {
    await spcd?.kill9();
    spcd = SpcdProcess.start(sb);
    await spcd.ready(60_000);
    await waitFor(
      'the new spcd lists them',
      async () => {
        const plan = JSON.parse((await cli('plan', '-o', 'json')).out) as PlanView;
        return plan.items.length === 0 && plan.problems.length === 0;
      },
      { timeoutMs: 30_000 },
    );
    const containers = await statusOnceListed();
    for (const s of SERVICES) {
      const now = await running(n(s.kolla));
      expect(now).toEqual(before.get(s.kolla));
      expect(containers.get(n(s.kolla))).toMatchObject({ generation: 1, containerId: now.id });
    }
  });
});

/**
 * Each way kolla-ansible's unit stops a container, against the box's real
 * systemd, on a container of its own that the module makes (not adopted):
 * the reason the runbook retires the units with a drop-in first. Its
 * graceful timeout is 5 s instead of kolla-ansible's 60 (the test's time),
 * and its command exits on SIGTERM, as a service does.
 */
describe('the hazards of a kolla-ansible unit, against a real systemd', () => {
  const name = n('hazard');
  const unit = `kolla-${name}-container.service`;
  const since = async (startedAt: string, what: string, cond: (r: Running) => boolean): Promise<Running> => {
    let last: Running | undefined;
    await waitFor(
      what,
      async () => {
        last = await running(name);
        return last.startedAt !== startedAt && cond(last);
      },
      { timeoutMs: 60_000 },
    );
    return last as Running;
  };
  const stopped = async (): Promise<void> => {
    await waitFor('the container stopped', async () => !(await running(name)).running, { timeoutMs: 30_000 });
  };

  beforeAll(async () => {
    const folder = join(ETC_KOLLA, 'hazard');
    mkdirSync(folder, { recursive: true });
    writeFileSync(
      join(folder, 'serve.sh'),
      "#!/bin/sh\ntrap 'exit 0' TERM INT\nwhile :; do sleep 1 & wait $!; done\n",
    );
    writeFileSync(
      join(folder, 'config.json'),
      JSON.stringify({
        command: '/usr/local/bin/serve.sh',
        config_files: [
          {
            source: '/var/lib/kolla/config_files/serve.sh',
            dest: '/usr/local/bin/serve.sh',
            owner: 'root',
            perm: '0755',
          },
        ],
      }),
    );
    const out = await kollaContainer({
      kolla: 'hazard',
      folder: 'hazard',
      params: {
        volumes: ['/etc/localtime:/etc/localtime:ro'],
        common_options: { ...COMMON, graceful_timeout: '5' },
      },
    });
    expect(out, out).toMatch(/CHANGED/);
    await waitFor('its unit runs it', async () => (await running(name)).running, { timeoutMs: 30_000 });
  }, 120_000);

  afterAll(async () => {
    await docker()
      .getContainer(name)
      .remove({ force: true })
      .catch(() => undefined);
  });

  it('stopping the unit runs its ExecStop: docker stop stops the container', async () => {
    await inBox(`systemctl stop ${unit}`);
    expect((await running(name)).running).toBe(false);
    const before = (await running(name)).startedAt;
    await inBox(`systemctl start ${unit}`);
    await since(before, 'started again by its unit', (r) => r.running);
  });

  it('SIGTERM to the attached docker start -a is passed on: the container stops, and the unit starts it again', async () => {
    const before = (await running(name)).startedAt;
    // The unit's main process is the attached CLI, up for a moment (it forwards signals once attached).
    const main = (await inBox(`systemctl show -p MainPID --value ${unit}`)).trim();
    expect(Number(main)).toBeGreaterThan(0);
    expect(await inBox(`tr '\\0' ' ' < /proc/${main}/cmdline`)).toContain(`docker start -a ${name}`);
    await inBox('sleep 2');
    await inBox(`kill -TERM ${main}`);
    await stopped();
    // Restart=always, RestartSec=11 (kolla-ansible's 120 s / 10 retries - 1)
    await since(before, 'started again by its unit', (r) => r.running);
  });

  it('disabling and deleting the unit file, then daemon-reload, leaves the loaded unit supervising it', async () => {
    await inBox(`systemctl disable ${unit} && rm /etc/systemd/system/${unit} && systemctl daemon-reload`);
    expect((await inBox(`systemctl is-active ${unit} || true`)).trim()).toBe('active');
    await inBox(`systemctl stop ${unit}`);
    await stopped();
  });
});
