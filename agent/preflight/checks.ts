/** One function per preflight check; each returns data, none throws. */
import { join } from 'node:path';
import { exists, findProcesses, inContainer, readText } from './host-scan.js';
import type { DockerInfoLite, PreflightCheck } from './types.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export const REQUIRED_MODULES = ['br_netfilter', 'ebtables', 'openvswitch'] as const;

export async function checkVirtualization(procRoot: string, devRoot: string): Promise<PreflightCheck> {
  const cpuinfo = await readText(join(procRoot, 'cpuinfo'));
  const flags = new Set(
    (cpuinfo ?? '')
      .split('\n')
      .filter((l) => /^flags\s*:/.test(l))
      .flatMap((l) => l.split(':')[1]!.trim().split(/\s+/)),
  );
  const cpu = flags.has('vmx') ? 'vmx (Intel VT-x)' : flags.has('svm') ? 'svm (AMD-V)' : undefined;
  const kvm = await exists(join(devRoot, 'kvm'));
  const missing: string[] = [];
  if (cpuinfo === undefined) missing.push(`${procRoot}/cpuinfo unreadable`);
  else if (!cpu)
    missing.push('no vmx/svm CPU flag (no hardware virtualization, or nested virtualization off)');
  if (!kvm) missing.push(`${devRoot}/kvm absent (kvm_intel/kvm_amd not loaded)`);
  return {
    name: 'virtualization',
    ok: missing.length === 0,
    // nova can still run guests under TCG emulation, slowly: reported, not blocking
    severity: 'warn',
    detail:
      missing.length === 0
        ? `${cpu}, ${devRoot}/kvm present`
        : `${missing.join('; ')}${kvm ? `; ${devRoot}/kvm present` : ''}; guests would fall back to QEMU TCG emulation`,
  };
}

export async function checkKernelModules(procRoot: string, sysRoot: string): Promise<PreflightCheck> {
  const modules = await readText(join(procRoot, 'modules'));
  const loaded = new Set((modules ?? '').split('\n').map((l) => l.split(' ')[0]!));
  const missing: string[] = [];
  for (const m of REQUIRED_MODULES) {
    // built-in modules are not in /proc/modules but do appear in /sys/module
    if (!loaded.has(m) && !(await exists(join(sysRoot, 'module', m)))) missing.push(m);
  }
  const why = modules === undefined ? ` (${procRoot}/modules unreadable)` : '';
  return {
    name: 'kernel-modules',
    ok: missing.length === 0,
    // the compute sets' containers load them at start (modprobe with /lib/modules mounted)
    severity: 'warn',
    detail:
      missing.length === 0
        ? `${REQUIRED_MODULES.join(', ')} loaded`
        : `not loaded: ${missing.join(', ')}${why}; load them (modprobe) or make sure the containers can`,
  };
}

export async function checkHostLibvirtd(procRoot: string, hypervisorSet: boolean): Promise<PreflightCheck> {
  const found = await findProcesses(procRoot, ['libvirtd', 'virtqemud']);
  const onHost = found.filter((p) => !inContainer(p.cgroup));
  const inCtr = found.length - onHost.length;
  return {
    name: 'host-libvirtd',
    ok: onHost.length === 0,
    severity: hypervisorSet ? 'block' : 'warn',
    detail:
      onHost.length === 0
        ? `no libvirtd on the host itself${inCtr > 0 ? ` (${inCtr} inside containers)` : ''}`
        : `libvirtd runs on the host outside any container (pid ${onHost.map((p) => p.pid).join(', ')}): ` +
          'it would fight the nova_libvirt container over /var/run/libvirt and the VMs; stop and disable it',
  };
}

export async function checkCgroups(
  procRoot: string,
  docker: DockerInfoLite | undefined,
): Promise<PreflightCheck> {
  const mounts =
    (await readText(join(procRoot, 'self', 'mounts'))) ?? (await readText(join(procRoot, 'mounts')));
  const rows = (mounts ?? '').split('\n').map((l) => l.split(' '));
  const v2 = rows.filter((r) => r[2] === 'cgroup2').map((r) => r[1]!);
  const v1 = rows.filter((r) => r[2] === 'cgroup').map((r) => r[1]!);
  if (mounts === undefined)
    return { name: 'cgroups', ok: false, severity: 'block', detail: `${procRoot}/self/mounts unreadable` };
  if (v1.length === 0 && v2.length === 0)
    return {
      name: 'cgroups',
      ok: false,
      severity: 'block',
      detail: 'no cgroup filesystem mounted: the engine cannot run containers and VMs cannot be placed',
    };
  const version = v1.length > 0 ? (v2.length > 0 ? 'v1 (hybrid, cgroup2 also mounted)' : 'v1') : 'v2';
  const where = (v1.length > 0 ? v1 : v2).slice(0, 3).join(', ');
  const engine = docker
    ? `; engine reports cgroup ${docker.cgroupVersion} with driver ${docker.cgroupDriver}`
    : '';
  return { name: 'cgroups', ok: true, severity: 'block', detail: `cgroup ${version} at ${where}${engine}` };
}

export function checkDisk(
  name: string,
  path: string,
  free: number | undefined,
  minWarn: number,
  minBlock: number,
): PreflightCheck {
  if (free === undefined)
    return { name, ok: false, severity: 'warn', detail: `cannot stat ${path} or any parent` };
  const fmt = (b: number) => (b >= GiB ? `${(b / GiB).toFixed(1)} GiB` : `${Math.round(b / MiB)} MiB`);
  if (free < minBlock)
    return {
      name,
      ok: false,
      severity: 'block',
      detail: `${fmt(free)} free under ${path}; at least ${fmt(minBlock)} needed`,
    };
  if (free < minWarn)
    return {
      name,
      ok: false,
      severity: 'warn',
      detail: `${fmt(free)} free under ${path}; ${fmt(minWarn)} advised`,
    };
  return {
    name,
    ok: true,
    severity: minBlock > 0 ? 'block' : 'warn',
    detail: `${fmt(free)} free under ${path}`,
  };
}

export const DISK_LIMITS = {
  images: { warn: 20 * GiB, block: 2 * GiB },
  state: { warn: 1 * GiB, block: 100 * MiB },
} as const;

function versionAtLeast(v: string, major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(v);
  if (!m) return false;
  return Number(m[1]) > major || (Number(m[1]) === major && Number(m[2]) >= minor);
}

const ENGINE_NAME = { docker: 'Docker', podman: 'Podman' } as const;
/** The oldest version of each engine spcd is tested on. */
const OLDEST_TESTED = { docker: [20, 10], podman: [4, 3] } as const;

export function checkDockerEngine(
  info: DockerInfoLite | undefined,
  expected?: DockerInfoLite['kind'],
): PreflightCheck {
  if (!info)
    return {
      name: 'docker-engine',
      ok: false,
      severity: 'block',
      detail: 'the container engine does not answer on its socket: nothing can be adopted or started',
    };
  const name = ENGINE_NAME[info.kind];
  if (expected && expected !== info.kind)
    return {
      name: 'docker-engine',
      ok: false,
      severity: 'block',
      detail: `--engine ${expected}, but ${name} ${info.version} answers on the socket: set --engine or --docker-socket`,
    };
  const [major, minor] = OLDEST_TESTED[info.kind];
  const ok = versionAtLeast(info.version, major, minor);
  return {
    name: 'docker-engine',
    ok,
    severity: ok ? 'block' : 'warn',
    detail: ok
      ? `${name} ${info.version}`
      : `${name} ${info.version} is older than ${major}.${minor}, the oldest tested`,
  };
}

export function checkLiveRestore(info: DockerInfoLite | undefined): PreflightCheck {
  if (!info)
    return { name: 'docker-live-restore', ok: false, severity: 'warn', detail: 'engine unreachable' };
  if (info.kind === 'podman')
    return {
      name: 'docker-live-restore',
      ok: true,
      severity: 'warn',
      detail:
        'Podman: each container is held by its own conmon, not by the API service, and keeps running across its restart',
    };
  return {
    name: 'docker-live-restore',
    ok: info.liveRestore,
    severity: 'warn',
    detail: info.liveRestore
      ? 'live-restore on: containers keep running across a dockerd restart'
      : 'live-restore off: a dockerd restart or upgrade restarts every compute container; set "live-restore": true in /etc/docker/daemon.json',
  };
}

export async function checkClockSync(procRoot: string, runRoot: string): Promise<PreflightCheck> {
  if (await exists(join(runRoot, 'systemd', 'timesync', 'synchronized')))
    return {
      name: 'clock-sync',
      ok: true,
      severity: 'warn',
      detail: 'systemd-timesyncd reports synchronized',
    };
  const daemons = await findProcesses(procRoot, ['chronyd', 'ntpd', 'systemd-timesyn', 'ntpsec', 'openntpd']);
  if (daemons.length > 0)
    return {
      name: 'clock-sync',
      ok: true,
      severity: 'warn',
      detail: `${[...new Set(daemons.map((d) => d.comm))].join(', ')} running (sync state not verified)`,
    };
  return {
    name: 'clock-sync',
    ok: false,
    severity: 'warn',
    // Lease expiry and TLS depend on it; spcd cannot read adjtimex state from Node.
    detail: `no time sync daemon (chronyd, ntpd, systemd-timesyncd) found and no ${runRoot}/systemd/timesync/synchronized; fleet lease expiry compares clocks across nodes`,
  };
}
