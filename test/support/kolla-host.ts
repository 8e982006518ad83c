import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { REPO, sandbox } from './daemon.js';
import { docker, ON_PODMAN } from './docker.js';
import { COMMON, DOCKER, KollaBox, run } from './kolla-box.js';

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
 * In the Podman lane (SPCD_ENGINE=podman) the host is a Podman one:
 * kolla_container gets `container_engine: podman` (podman-py, units that run
 * `podman`), and the volumes are the roles' for Podman (/run without
 * propagation, its shared folders one by one, nova_libvirt's devpts mount).
 *
 * spcd then scans them, the operator's set is the scan, the plan says adopt
 * for each and nothing else, and each is adopted on the operator's word: the
 * same container id, the same State.StartedAt, no restart, also after a
 * SIGKILL of spcd and a new spcd.
 */
export { COMMON, DOCKER, run };
export const KOLLA_IMAGE = 'spcd-e2e/kolla-runtime:bookworm';
export const sb = sandbox('adopt-kolla');
export const box = `spcd-${sb.instance}-host`;
export const n = (kolla: string): string => `${sb.instance}-${kolla}`;
export const ETC_KOLLA = join(sb.root, 'etc', 'kolla');
export const SET = 'kolla';
// The config folders at the same path as on the host: the engine resolves bind sources there.
const kollaBox = new KollaBox(box, [`${sb.root}:${sb.root}`], ON_PODMAN ? 'podman' : 'docker');

/**
 * /run on a Podman host (group_vars/all.yml, podman #16305): /run bound
 * without propagation, and the folders that must be shared bound one by one
 * (run_default_volumes_podman); kolla-ansible creates them first.
 */
const RUN_SHARED_PODMAN = ['/run/netns', '/run/lock/nova', '/run/libvirt', '/run/nova', '/run/openvswitch'];
const RUN = ON_PODMAN ? ['/run:/run'] : ['/run:/run:shared'];
const RUN_DEFAULT = ON_PODMAN ? RUN_SHARED_PODMAN.map((d) => `${d}:${d}:shared`) : [];

export interface KollaService {
  readonly kolla: string;
  readonly folder: string;
  readonly params: Record<string, unknown>;
}

/** The roles' parameters (nova-cell, neutron, openvswitch defaults), with this machine's changes. */
export const SERVICES: readonly KollaService[] = [
  {
    kolla: 'nova_libvirt',
    folder: 'nova-libvirt',
    params: {
      pid_mode: 'host',
      cgroupns_mode: 'host',
      volumes: [
        '/etc/localtime:/etc/localtime:ro',
        '/lib/modules:/lib/modules:ro',
        ...RUN,
        '/dev:/dev',
        ...(ON_PODMAN ? ['devpts:/dev/pts'] : []),
        '/sys/fs/cgroup:/sys/fs/cgroup',
        `${n('kolla_logs')}:/var/log/kolla/`,
        `${n('libvirtd')}:/var/lib/libvirt`,
        `${n('nova_compute')}:/var/lib/nova/`,
        `${n('nova_libvirt_qemu')}:/etc/libvirt/qemu`,
        ...RUN_DEFAULT,
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
        ...RUN,
        '/dev:/dev',
        `${n('kolla_logs')}:/var/log/kolla/`,
        `${n('libvirtd')}:/var/lib/libvirt`,
        `${n('nova_compute')}:/var/lib/nova/`,
        ...RUN_DEFAULT,
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

export const inBox = (script: string, timeout = 120_000): Promise<string> => kollaBox.sh(script, timeout);

/** kolla_container, as a role's handler calls it (privileged in the roles: CAPS here). */
export function kollaContainer(s: KollaService): Promise<string> {
  return kollaBox.container({
    name: n(s.kolla),
    image: KOLLA_IMAGE,
    configDir: join(ETC_KOLLA, s.folder),
    params: s.params,
    privileged: true,
  });
}

export interface Running {
  readonly id: string;
  readonly startedAt: string;
  readonly restartCount: number;
  readonly running: boolean;
}

export async function running(name: string): Promise<Running> {
  const i = (await docker().getContainer(name).inspect()) as {
    Id: string;
    RestartCount: number;
    State: { StartedAt: string; Running: boolean };
  };
  return { id: i.Id, startedAt: i.State.StartedAt, restartCount: i.RestartCount, running: i.State.Running };
}

/**
 * The box (systemd as PID 1, the host's Docker socket) up before the file's
 * tests, with kolla-ansible's SERVICES made in it when `services`; all of it
 * removed after.
 */
export function kollaHostStand(services: boolean): void {
  beforeAll(async () => {
    for (const s of services ? SERVICES : []) {
      mkdirSync(join(ETC_KOLLA, s.folder), { recursive: true });
      // Kolla's config.json; the service's own command would need a control plane: a long sleep stands in.
      writeFileSync(
        join(ETC_KOLLA, s.folder, 'config.json'),
        JSON.stringify({ command: 'sleep infinity', config_files: [] }, null, 4),
      );
    }
    if (ON_PODMAN) {
      for (const d of RUN_SHARED_PODMAN) mkdirSync(d, { recursive: true });
      // The image is built with Docker; kolla-ansible's Podman host pulls it into Podman's store.
      execFileSync('bash', [join(REPO, 'scripts/podman/load-images.sh'), KOLLA_IMAGE], {
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { ...process.env, SPCD_DOCKER_SOCKET: '/var/run/docker.sock' },
      });
    }
    await kollaBox.up();
    for (const s of services ? SERVICES : []) {
      const out = await kollaContainer(s);
      expect(out, out).toMatch(/CHANGED/);
    }
  }, 900_000);

  afterAll(async () => {
    await kollaBox.down();
    // Killed first: Podman's forced remove stops a container with its stop timeout (kolla's 60 s), Docker's kills it.
    for (const s of SERVICES) {
      const c = docker().getContainer(n(s.kolla));
      await c.kill().catch(() => undefined);
      await c.remove({ force: true }).catch(() => undefined);
    }
    for (const v of ['kolla_logs', 'libvirtd', 'nova_compute', 'nova_libvirt_qemu'])
      await docker()
        .getVolume(n(v))
        .remove()
        .catch(() => undefined);
  }, 120_000);
}
