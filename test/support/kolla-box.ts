import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO } from './daemon.js';
import { systemdBoxRun } from './systemd-box.js';
import { waitFor } from './wait.js';

/**
 * A host's kolla-ansible, in a box: a container that runs systemd as PID 1
 * (this machine's PID 1 is not systemd) and holds the host's Docker socket
 * (or, for a Podman host, Podman's: `engine` below),
 * with Debian's ansible-core, python3-docker and python3-dbus, where
 * kolla-ansible's own kolla_container module (the peer's code, run from
 * ../shared/peers, never copied) creates containers on the host's engine
 * and writes their systemd units kolla-<name>-container.service into the
 * box's systemd, as it does on a real host.
 */
export const run = promisify(execFile);
export const DOCKER = '/usr/bin/docker';
export const KOLLA_HOST_IMAGE = 'spcd-e2e/kolla-ansible-host:bookworm';
export const PEER = join(REPO, '..', 'shared', 'peers', 'kolla-ansible-2024.1');

/** Every capability Docker 20.10 knows but SYS_RESOURCE, which this VM's bounding set lacks: what `privileged: true` becomes here. */
export const CAPS = [
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
export const COMMON = {
  environment: { KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS' },
  restart_policy: 'unless-stopped',
  restart_retries: '10',
  graceful_timeout: '60',
  client_timeout: '120',
  container_engine: 'docker',
};

/** Which engine the box's kolla-ansible deploys on (`kolla_container_engine`). */
export type KollaEngine = 'docker' | 'podman';

/** Podman's API service, where kolla_container's Podman worker and the units' `podman` reach it. */
export const PODMAN_SOCKET = '/run/podman/podman.sock';

/** The box's image for an engine: Podman's holds podman-py and a remote `podman` (build-podman-image.sh). */
const BOX = {
  docker: { image: KOLLA_HOST_IMAGE, script: 'scripts/kolla-ansible-host/build-image.sh', binds: [] },
  podman: {
    image: `${KOLLA_HOST_IMAGE}-podman`,
    script: 'scripts/kolla-ansible-host/build-podman-image.sh',
    binds: [`${PODMAN_SOCKET}:${PODMAN_SOCKET}`],
  },
} as const;

/** One container as a role's handler asks kolla_container for it. */
export interface KollaContainer {
  readonly name: string;
  readonly image: string;
  /** The host's /etc/kolla/<service>/: bound read-only at /var/lib/kolla/config_files/. */
  readonly configDir: string;
  /** The role's parameters: volumes, namespaces, environment, command, security_opt, tmpfs. */
  readonly params: Readonly<Record<string, unknown>>;
  /** The role's `privileged: true`: explicit capabilities here (CAPS), this VM cannot start it. */
  readonly privileged: boolean;
}

export class KollaBox {
  /**
   * @param name the box container's name
   * @param binds extra binds of the box ("source:target[:mode]"): the config
   *   folders at the same path as on the host (the engine resolves bind
   *   sources there)
   */
  constructor(
    readonly name: string,
    private readonly binds: readonly string[],
    readonly engine: KollaEngine = 'docker',
  ) {}

  /** The image built (cached), the box started, its systemd up. The box itself runs on Docker. */
  async up(): Promise<void> {
    const box = BOX[this.engine];
    execFileSync('bash', [join(REPO, box.script)], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, SPCD_DOCKER_SOCKET: '/var/run/docker.sock' },
    });
    execFileSync(
      DOCKER,
      systemdBoxRun(
        this.name,
        [`${DOCKER}:/usr/bin/docker:ro`, `${PEER}:${PEER}:ro`, ...box.binds, ...this.binds],
        box.image,
      ),
    );
    await this.systemdUp();
  }

  /** Waits for the box's systemd to finish starting (after `up`, or a restart of the box). */
  async systemdUp(): Promise<void> {
    await waitFor(
      'systemd up',
      async () => /running|degraded/.test(await this.sh('systemctl is-system-running || true')),
      { timeoutMs: 60_000 },
    );
  }

  /** A shell script run in the box; its stdout. */
  readonly sh = async (script: string, timeout = 120_000): Promise<string> =>
    (await run(DOCKER, ['exec', this.name, 'sh', '-c', script], { encoding: 'utf8', timeout })).stdout;

  /**
   * kolla_container, as a role's handler calls it (action
   * recreate_or_restart_container); its output. A failed module exits
   * non-zero: its message is the output the caller shows.
   */
  async container(c: KollaContainer): Promise<string> {
    const { volumes, ...rest } = c.params as { volumes?: string[] };
    const args = {
      action: 'recreate_or_restart_container',
      common_options: { ...COMMON, container_engine: this.engine },
      name: c.name,
      image: c.image,
      privileged: false,
      ...(c.privileged ? { cap_add: CAPS } : {}),
      ...rest,
      volumes: [`${c.configDir}/:/var/lib/kolla/config_files/:ro`, ...(volumes ?? [])],
      dimensions: {},
    };
    const env = `ANSIBLE_LIBRARY=${PEER}/library ANSIBLE_MODULE_UTILS=${PEER}/module_utils ANSIBLE_NOCOLOR=1`;
    const quoted = JSON.stringify(args).replaceAll("'", `'"'"'`);
    return this.sh(
      `${env} ansible localhost -c local -m kolla_container -a '${quoted}' 2>&1 || true`,
      600_000,
    );
  }

  /** The box removed (the containers it made are the caller's). */
  async down(): Promise<void> {
    await run(DOCKER, ['rm', '-f', this.name]).catch(() => undefined);
  }
}
