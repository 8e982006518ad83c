/**
 * The OpenStack end-to-end test's compute host as kolla-ansible 2024.1
 * builds it (docs/explanation/openstack-proof.md, "A kolla-ansible host"):
 * openvswitch_db, openvswitch_vswitchd, neutron_openvswitch_agent,
 * nova_libvirt and nova_compute made by kolla-ansible's own kolla_container
 * module in a box with systemd as PID 1 (test/support/kolla-box.ts), each
 * with its unit kolla-<name>-container.service, with the nova-cell,
 * openvswitch and neutron roles' parameters and named volumes. Their config
 * folders, /etc/kolla/<service>/, hold what spcd's templates rendered for the
 * same host (the Open vSwitch variant's config, copied from spcd's config
 * root): kolla-ansible's own templates are not run here.
 *
 * What this machine changes, each also said where it is made:
 * - the images are the test's (Kolla's runtime over Debian's packages);
 *   they carry no KOLLA_SERVICE_NAME, so the environment does, and the
 *   libvirt image's own command is libvirtd, so the role's container gets
 *   `command: kolla_start` (Kolla's images start with it);
 * - `privileged: true` becomes every capability but SYS_RESOURCE (this VM
 *   cannot start --privileged); what privileged gives beyond that and a
 *   container needs here is added: /dev/net/tun bound into vswitchd (the
 *   userspace datapath's TAP ports), a tmpfs on /sys/fs/cgroup/unified for
 *   libvirt, and a writable /proc/sys in nova_compute (os-vif's hybrid plug
 *   writes it), remounted right after its creation since kolla_container
 *   has no option for it;
 * - vswitchd skips Kolla's extend_start (KOLLA_SKIP_EXTEND_START: it runs
 *   `modprobe openvswitch`, and the host has no such module), and
 *   kolla-ansible's post-config (the bridges of bridge_mappings) runs as the
 *   rendered ensure-bridges script in the container;
 * - no Docker healthchecks and no ulimits (dimensions): the memlock limit
 *   of the roles needs SYS_RESOURCE; libvirt's SASL user is not made (no
 *   migration over TCP here).
 */
import { cpSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { docker } from '../support/docker.js';
import { DOCKER, KollaBox, run } from '../support/kolla-box.js';
import { waitFor } from '../support/wait.js';
import { OPENSTACK_IMAGE } from './openstack-e2e-harness.js';

export interface KollaComputeService {
  /** The container's name (kolla-ansible's). */
  readonly kolla: string;
  /** Its folder under /etc/kolla. */
  readonly folder: string;
  readonly image: string;
  readonly privileged: boolean;
  readonly params: Readonly<Record<string, unknown>>;
}

const OVS_IMAGE = 'spcd-e2e/openvswitch:zed';
const LIBVIRT_IMAGE = 'spcd-e2e/libvirt:bookworm';
/** The roles' common volumes (the timezone file where the host has one, as on a Debian host). */
const BASE = [
  '/etc/localtime:/etc/localtime:ro',
  ...(existsSync('/etc/timezone') ? ['/etc/timezone:/etc/timezone:ro'] : []),
  '/lib/modules:/lib/modules:ro',
];
const OVS_RUN = '/run/openvswitch:/run/openvswitch:shared';
const LOGS = 'kolla_logs:/var/log/kolla/';

/** In the order a deploy makes them: Open vSwitch, the agent, libvirt, nova-compute. */
export const KOLLA_COMPUTE: readonly KollaComputeService[] = [
  {
    kolla: 'openvswitch_db',
    folder: 'openvswitch-db-server',
    image: OVS_IMAGE,
    privileged: false,
    params: {
      environment: { KOLLA_SERVICE_NAME: 'openvswitch-db' },
      volumes: [...BASE, OVS_RUN, LOGS, 'openvswitch_db:/var/lib/openvswitch/'],
    },
  },
  {
    kolla: 'openvswitch_vswitchd',
    folder: 'openvswitch-vswitchd',
    image: OVS_IMAGE,
    privileged: true,
    params: {
      environment: { KOLLA_SERVICE_NAME: 'openvswitch-vswitchd', KOLLA_SKIP_EXTEND_START: 'true' },
      volumes: [...BASE, OVS_RUN, LOGS, '/dev/net/tun:/dev/net/tun'],
    },
  },
  {
    kolla: 'neutron_openvswitch_agent',
    folder: 'neutron-openvswitch-agent',
    image: OVS_IMAGE,
    privileged: true,
    params: {
      environment: { KOLLA_SERVICE_NAME: 'neutron-openvswitch-agent', KOLLA_LEGACY_IPTABLES: 'false' },
      volumes: [...BASE, OVS_RUN, LOGS],
    },
  },
  {
    kolla: 'nova_libvirt',
    folder: 'nova-libvirt',
    image: LIBVIRT_IMAGE,
    privileged: true,
    params: {
      pid_mode: 'host',
      cgroupns_mode: 'host',
      command: 'kolla_start',
      tmpfs: ['/sys/fs/cgroup/unified'],
      environment: { KOLLA_SERVICE_NAME: 'nova-libvirt' },
      volumes: [
        ...BASE,
        '/run:/run:shared',
        '/dev:/dev',
        '/sys/fs/cgroup:/sys/fs/cgroup',
        LOGS,
        'libvirtd:/var/lib/libvirt',
        'nova_compute:/var/lib/nova/',
        'nova_libvirt_qemu:/etc/libvirt/qemu',
      ],
    },
  },
  {
    kolla: 'nova_compute',
    folder: 'nova-compute',
    image: OPENSTACK_IMAGE,
    privileged: true,
    params: {
      ipc_mode: 'host',
      environment: { LIBGUESTFS_BACKEND: 'direct', KOLLA_SERVICE_NAME: 'nova-compute' },
      volumes: [
        ...BASE,
        '/run:/run:shared',
        '/dev:/dev',
        LOGS,
        'libvirtd:/var/lib/libvirt',
        'nova_compute:/var/lib/nova/',
      ],
    },
  },
];

export const KOLLA_NAMES = KOLLA_COMPUTE.map((s) => s.kolla);
export const kollaUnit = (name: string): string => `kolla-${name}-container.service`;
/** The box (systemd as PID 1) that is the kolla-ansible host of the run `instance`. */
export const kollaBoxName = (instance: string): string => `spcd-${instance}-kolla`;

/** What the engine says of a container: an adopted one keeps all of it. */
export interface Started {
  readonly id: string;
  readonly startedAt: string;
  readonly restartCount: number;
}

export async function started(name: string): Promise<Started> {
  const i = (await docker().getContainer(name).inspect()) as {
    Id: string;
    RestartCount: number;
    State: { StartedAt: string };
  };
  return { id: i.Id, startedAt: i.State.StartedAt, restartCount: i.RestartCount };
}

export class KollaComputeHost {
  readonly etcKolla: string;
  readonly box: KollaBox;

  /** @param root the run's host folder: /etc/kolla is ROOT/etc-kolla, bound into the box at the same path. */
  constructor(root: string, instance: string) {
    this.etcKolla = join(root, 'etc-kolla');
    this.box = new KollaBox(kollaBoxName(instance), [`${root}:${root}`]);
  }

  /** The host's /etc/kolla/<service>/: what spcd rendered for each container (CONFIG_ROOT/<name>/current). */
  copyConfig(configRoot: string): void {
    mkdirSync(this.etcKolla, { recursive: true });
    for (const s of KOLLA_COMPUTE)
      cpSync(join(configRoot, s.kolla, 'current'), join(this.etcKolla, s.folder), {
        recursive: true,
        dereference: true,
      });
  }

  /** The box up, then each container as the roles' handlers make it, with the post-config between. */
  async up(): Promise<void> {
    await this.box.up();
    for (const s of KOLLA_COMPUTE) {
      const out = await this.box.container({
        name: s.kolla,
        image: s.image,
        configDir: join(this.etcKolla, s.folder),
        params: s.params,
        privileged: s.privileged,
      });
      if (!/CHANGED/.test(out)) throw new Error(`kolla_container ${s.kolla}: ${out}`);
      if (s.kolla === 'openvswitch_vswitchd') await this.postConfig();
      // What privileged leaves unmasked, before nova-compute plugs a port (see the header).
      if (s.kolla === 'nova_compute')
        await run(DOCKER, ['exec', s.kolla, 'mount', '-o', 'remount,bind,rw', '/proc/sys']);
    }
  }

  /** kolla-ansible's post-config: the bridges of bridge_mappings, once vswitchd answers. */
  private async postConfig(): Promise<void> {
    await waitFor(
      'vswitchd answering',
      () =>
        run(DOCKER, ['exec', 'openvswitch_vswitchd', 'ovs-appctl', 'version']).then(
          () => true,
          () => false,
        ),
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    await run(DOCKER, ['exec', 'openvswitch_vswitchd', 'bash', '/var/lib/kolla/config_files/ensure-bridges']);
  }

  /** Each unit: active, enabled, with its ExecStop (what kolla-ansible left). */
  async unitStates(): Promise<string[]> {
    const out: string[] = [];
    for (const name of KOLLA_NAMES)
      out.push(
        `${name}=${(await this.box.sh(`systemctl is-active ${kollaUnit(name)} || true`)).trim()}/${(await this.box.sh(`systemctl is-enabled ${kollaUnit(name)} || true`)).trim()}`,
      );
    return out;
  }

  /**
   * The runbook's retirement (docs/how-to/adopt.md): a drop-in that empties
   * ExecStop, kills only the attached CLI with SIGKILL and ends
   * Restart=always; then disable --now. Returns how many units ended
   * inactive, disabled, with no ExecStop.
   */
  async retire(): Promise<number> {
    let retired = 0;
    for (const name of KOLLA_NAMES) {
      const unit = kollaUnit(name);
      await this.box.sh(
        [
          `mkdir -p /etc/systemd/system/${unit}.d`,
          `printf '[Service]\\nExecStop=\\nKillSignal=SIGKILL\\nRestart=no\\n' > /etc/systemd/system/${unit}.d/retire.conf`,
          'systemctl daemon-reload',
          `systemctl disable --now ${unit}`,
          `systemctl reset-failed ${unit} || true`,
        ].join(' && '),
      );
      const state = await this.box.sh(
        `echo $(systemctl is-active ${unit}) $(systemctl is-enabled ${unit}) "[$(systemctl show -p ExecStop --value ${unit})]"`,
      );
      if (state.trim() === 'inactive disabled []') retired++;
      else console.log(`kolla unit ${unit} not retired: ${state.trim()}`);
    }
    return retired;
  }

  /** The box and every container of the host removed (spcd's own, after an upgrade, too). */
  async down(): Promise<string[]> {
    await this.box.down();
    const removed: string[] = [];
    for (const name of KOLLA_NAMES)
      if (
        await docker()
          .getContainer(name)
          .remove({ force: true })
          .then(() => true)
          .catch(() => false)
      )
        removed.push(name);
    return removed;
  }
}
