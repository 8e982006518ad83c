import type { CgroupnsMode, CheckSpec, ContainerSpec, IpcMode, PidMode, UtsMode } from '../model/spec.js';
import { RESERVED_LABEL_PREFIX } from '../model/labels.js';
import { validateCheck, type CheckLibrary } from './check.js';
import { readSysctls, readUlimits } from './kernel-params.js';
import { BOOTSTRAP_TIMEOUT_MS, readBootstrap } from './bootstrap.js';
import { CONFIG_DEFAULTS, readConfig, readPermissions } from './kolla-config.js';
import { readMounts } from './mounts.js';
import { readCensus } from './census.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/** One container definition (after overrides were merged into it) -> ContainerSpec. */

export const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
export const CONTAINER_KEYS = [
  'image',
  'command',
  'entrypoint',
  'user',
  'working_dir',
  'environment',
  'privileged',
  'pid',
  'network',
  'ipc',
  'uts',
  'cgroupns',
  'binds',
  'tmpfs',
  'devices',
  'cap_add',
  'cap_drop',
  'security_opt',
  'ulimits',
  'sysctls',
  'memory',
  'shm_size',
  'init',
  'labels',
  'stop_signal',
  'stop_grace_period',
  'depends_on',
  'role',
  'healthchecks',
  'config',
  'permissions',
  'bootstrap',
  'census',
] as const;

export const CONTAINER_DEFAULTS = {
  privileged: false,
  pid: 'private' as PidMode,
  network: 'bridge',
  ipc: 'private' as IpcMode,
  uts: 'private' as UtsMode,
  cgroupns: 'private' as CgroupnsMode,
  init: false,
  stopSignal: 'SIGTERM',
  stopGraceMs: 10_000,
  role: 'service' as const,
  configOwner: CONFIG_DEFAULTS.owner,
  configMode: CONFIG_DEFAULTS.mode,
  bootstrapTimeoutMs: BOOTSTRAP_TIMEOUT_MS,
} as const;

/** Linux capabilities (capabilities(7)), without the CAP_ prefix. */
export const CAPABILITIES: ReadonlySet<string> = new Set([
  'ALL',
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'AUDIT_WRITE',
  'BLOCK_SUSPEND',
  'BPF',
  'CHECKPOINT_RESTORE',
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
  'PERFMON',
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
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'WAKE_ALARM',
]);

const IMAGE =
  /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
const USER = /^[A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?$/;
const NETWORK_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]*$/;
const SIGNAL = /^SIG[A-Z0-9+-]+$/;
const MIN_MEMORY = 6 * 1024 * 1024;

export interface ContainerContext {
  readonly name: string;
  /** Full slash path of the owning set. */
  readonly set: string;
  /** Names of the other containers of the same set (for depends_on). */
  readonly siblings: ReadonlySet<string>;
  readonly library: CheckLibrary | undefined;
}

export function validateContainer(
  r: Reader,
  raw: unknown,
  where: Where,
  ctx: ContainerContext,
): ContainerSpec | undefined {
  const m = r.mapping(raw, where, CONTAINER_KEYS);
  if (!m) return undefined;
  const before = r.problems.count;
  const at = (k: string): Where => r.child(m, k, where);
  const opt = <T>(k: string, read: (v: unknown, w: Where) => T | undefined): T | undefined =>
    m[k] === undefined ? undefined : read(m[k], at(k));

  if (m.image === undefined) r.fail(where, 'image is required');
  const image = opt('image', (v, w) =>
    r.string(v, w, { pattern: IMAGE, what: 'an image reference (e.g. kolla/nova-libvirt:2024.1)' }),
  );
  const command = opt('command', (v, w) => r.strings(v, w, { nonEmpty: true }));
  const entrypoint = opt('entrypoint', (v, w) => r.strings(v, w, { nonEmpty: true }));
  const user = opt('user', (v, w) => r.string(v, w, { pattern: USER, what: 'a user[:group] name or id' }));
  const workingDir = opt('working_dir', (v, w) => r.absPath(v, w));
  const environment =
    opt('environment', (v, w) =>
      r.textMap(v, w, {
        pattern: ENV_KEY,
        what: 'an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
        lineSafe: true,
      }),
    ) ?? {};
  const privileged = opt('privileged', (v, w) => r.boolean(v, w)) ?? CONTAINER_DEFAULTS.privileged;
  const pid = opt('pid', (v, w) => r.oneOf(v, w, ['host', 'private'] as const)) ?? CONTAINER_DEFAULTS.pid;
  const network = opt('network', (v, w) => readNetwork(r, v, w)) ?? CONTAINER_DEFAULTS.network;
  const ipc =
    opt('ipc', (v, w) => r.oneOf(v, w, ['host', 'private', 'shareable'] as const)) ?? CONTAINER_DEFAULTS.ipc;
  const uts = opt('uts', (v, w) => r.oneOf(v, w, ['host', 'private'] as const)) ?? CONTAINER_DEFAULTS.uts;
  const cgroupns =
    opt('cgroupns', (v, w) => r.oneOf(v, w, ['host', 'private'] as const)) ?? CONTAINER_DEFAULTS.cgroupns;
  const mounts = readMounts(r, m, at);
  const capAdd = opt('cap_add', (v, w) => readCaps(r, v, w)) ?? [];
  const capDrop = opt('cap_drop', (v, w) => readCaps(r, v, w)) ?? [];
  const securityOpt = opt('security_opt', (v, w) => r.strings(v, w)) ?? [];
  const ulimits = opt('ulimits', (v, w) => readUlimits(r, v, w)) ?? [];
  const sysctls = opt('sysctls', (v, w) => readSysctls(r, v, w, { network, ipc, uts })) ?? {};
  const memoryBytes = opt('memory', (v, w) => r.size(v, w, MIN_MEMORY));
  const shmSizeBytes = opt('shm_size', (v, w) => r.size(v, w, 1));
  const init = opt('init', (v, w) => r.boolean(v, w)) ?? CONTAINER_DEFAULTS.init;
  const labels =
    opt('labels', (v, w) =>
      r.textMap(v, w, {
        pattern: LABEL_KEY,
        what: 'a label key',
        check: (k) =>
          k.toLowerCase().startsWith(RESERVED_LABEL_PREFIX)
            ? `label keys starting with "${RESERVED_LABEL_PREFIX}" are reserved for spcd`
            : undefined,
      }),
    ) ?? {};
  const stopSignal =
    opt('stop_signal', (v, w) => r.string(v, w, { pattern: SIGNAL, what: 'a signal name like SIGTERM' })) ??
    CONTAINER_DEFAULTS.stopSignal;
  const stopGraceMs =
    opt('stop_grace_period', (v, w) => r.duration(v, w, 0)) ?? CONTAINER_DEFAULTS.stopGraceMs;
  const dependsOn = opt('depends_on', (v, w) => readDependsOn(r, v, w, ctx)) ?? [];
  const role =
    opt('role', (v, w) => r.oneOf(v, w, ['service', 'hypervisor'] as const)) ?? CONTAINER_DEFAULTS.role;
  const healthchecks = opt('healthchecks', (v, w) => readChecks(r, v, w, ctx.library)) ?? [];
  const config = opt('config', (v, w) => readConfig(r, v, w)) ?? [];
  const permissions = opt('permissions', (v, w) => readPermissions(r, v, w));
  const bootstrap = opt('bootstrap', (v, w) => readBootstrap(r, v, w)) ?? [];
  const census = opt('census', (v, w) => readCensus(r, v, w, role));
  if (
    r.problems.count === before &&
    command === undefined &&
    (config.length > 0 || (permissions?.length ?? 0) > 0)
  )
    r.fail(
      at(m.config !== undefined ? 'config' : 'permissions'),
      "needs command: the image's kolla_start runs config.json's command, which spcd writes from it",
    );

  if (
    r.problems.count !== before ||
    image === undefined ||
    !mounts.binds ||
    !mounts.tmpfs ||
    !mounts.devices
  ) {
    return undefined;
  }
  return {
    name: ctx.name,
    set: ctx.set,
    image,
    ...(command ? { command } : {}),
    ...(entrypoint ? { entrypoint } : {}),
    ...(user !== undefined ? { user } : {}),
    ...(workingDir !== undefined ? { workingDir } : {}),
    environment,
    privileged,
    pid,
    network,
    ipc,
    uts,
    cgroupns,
    binds: mounts.binds,
    tmpfs: mounts.tmpfs,
    devices: mounts.devices,
    capAdd,
    capDrop,
    securityOpt,
    ulimits,
    sysctls,
    ...(memoryBytes !== undefined ? { memoryBytes } : {}),
    ...(shmSizeBytes !== undefined ? { shmSizeBytes } : {}),
    init,
    labels,
    stopSignal,
    stopGraceMs,
    dependsOn,
    healthchecks,
    role,
    config,
    ...(permissions && permissions.length > 0 ? { permissions } : {}),
    bootstrap,
    ...(census ? { census } : {}),
    source: `${where.file}:${where.line}`,
  };
}

function readNetwork(r: Reader, v: unknown, w: Where): string | undefined {
  if (typeof v !== 'string' || !NETWORK_NAME.test(v)) {
    r.fail(w, `must be host, none, bridge or a network name (got ${JSON.stringify(v)})`);
    return undefined;
  }
  return v;
}

/** Upper-case, without CAP_, known to Linux (or ALL), de-duplicated, sorted. */
function readCaps(r: Reader, v: unknown, w: Where): string[] | undefined {
  const list = r.strings(v, w);
  if (!list) return undefined;
  const out = new Set<string>();
  let ok = true;
  list.forEach((cap, i) => {
    const name = cap.trim().toUpperCase().replace(/^CAP_/, '');
    if (!CAPABILITIES.has(name)) {
      r.fail(r.child(v, i, w), `${JSON.stringify(cap)} is not a Linux capability`);
      ok = false;
    } else out.add(name);
  });
  return ok ? [...out].sort() : undefined;
}

function readDependsOn(r: Reader, v: unknown, w: Where, ctx: ContainerContext): string[] | undefined {
  const list = r.strings(v, w);
  if (!list) return undefined;
  const seen = new Set<string>();
  let ok = true;
  list.forEach((dep, i) => {
    const dw = r.child(v, i, w);
    if (dep === ctx.name) {
      r.fail(dw, `depends_on forms a cycle: ${dep} -> ${dep}`, 'SPEC_CYCLE');
      ok = false;
    } else if (!ctx.siblings.has(dep)) {
      const known = [...ctx.siblings].filter((s) => s !== ctx.name).join(', ') || 'none';
      r.fail(dw, `"${dep}" is not a container of set ${ctx.set} (known: ${known})`);
      ok = false;
    } else if (seen.has(dep)) {
      r.fail(dw, `"${dep}" is listed twice`);
      ok = false;
    }
    seen.add(dep);
  });
  return ok ? list : undefined;
}

function readChecks(
  r: Reader,
  v: unknown,
  w: Where,
  library: CheckLibrary | undefined,
): CheckSpec[] | undefined {
  const cr = r.withCode('CHECK_INVALID');
  const list = cr.list(v, w);
  if (!list) return undefined;
  const out: CheckSpec[] = [];
  const names = new Map<string, string>();
  let ok = true;
  list.forEach((item, i) => {
    const iw = cr.child(list, i, w);
    const check = validateCheck(cr, item, iw, library);
    if (!check) {
      ok = false;
      return;
    }
    const first = names.get(check.name);
    if (first !== undefined) {
      cr.fail(iw, `check name "${check.name}" is already used by ${first}`);
      ok = false;
      return;
    }
    names.set(check.name, iw.path);
    out.push(check);
  });
  return ok ? out : undefined;
}
