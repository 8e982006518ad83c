import { hasKollaConfig, type ContainerSpec } from '../model/spec.js';
import type { CreateBody } from './create-options.js';
import { bindsWithoutDevpts, devptsTargets, ulimitName, type InspectedMount } from './dialect.js';

/** The parts of `docker inspect` that a definition decides. */
export interface InspectedRuntime {
  readonly Config: {
    readonly Image: string;
    readonly Env?: readonly string[] | null;
    readonly Cmd?: readonly string[] | null;
    readonly Entrypoint?: readonly string[] | null;
    readonly User?: string;
    readonly WorkingDir?: string;
  };
  readonly HostConfig: Readonly<Record<string, unknown>>;
  readonly Mounts?: readonly InspectedMount[] | null;
}

/** What the image itself sets: a container that keeps it chose nothing. */
export interface ImageDefaults {
  readonly Env?: readonly string[] | null;
  readonly Cmd?: readonly string[] | null;
  readonly Entrypoint?: readonly string[] | null;
  readonly User?: string;
}

/** HostConfig keys compared, with the definition's key each comes from. */
const HOST_KEYS: readonly (readonly [string, string])[] = [
  ['Privileged', 'privileged'],
  ['PidMode', 'pid'],
  ['NetworkMode', 'network'],
  ['IpcMode', 'ipc'],
  ['UTSMode', 'uts'],
  ['CgroupnsMode', 'cgroupns'],
  ['CapAdd', 'cap_add'],
  ['CapDrop', 'cap_drop'],
  ['SecurityOpt', 'security_opt'],
  ['Binds', 'binds'],
  ['Tmpfs', 'tmpfs'],
  ['Devices', 'devices'],
  ['Ulimits', 'ulimits'],
  ['Sysctls', 'sysctls'],
  ['Memory', 'memory'],
  ['ShmSize', 'shm_size'],
  ['PidsLimit', 'pids_limit'],
  ['Init', 'init'],
];

/** Keys a definition that does not set them leaves to the engine's default (e.g. ShmSize 64 MiB). */
const ENGINE_DEFAULTS = new Set(['Memory', 'ShmSize', 'PidsLimit', 'Init']);

const PROPAGATION = new Set(['shared', 'slave', 'private', 'rshared', 'rslave', 'rprivate']);

/** A path as Docker resolves it: "/etc/kolla/nova-compute/" is "/etc/kolla/nova-compute". */
const trimSlash = (p: string): string => (p.startsWith('/') ? p.replace(/\/+$/, '') || '/' : p);

/**
 * A bind in one spelling: "source:target:ro|rw[:propagation]", the default
 * mode written out and the default propagation (rprivate) left out. Podman
 * reports every bind with the options it applied ("/a:/b:ro,rprivate,rbind"
 * for "/a:/b:ro"); Docker as it was asked for. Both read the same here.
 */
export function bindKey(b: string): string {
  const [src = '', dst = '', opts = ''] = b.split(':');
  const flags = opts.split(',').filter((o) => o !== '');
  const mode = flags.includes('ro') ? 'ro' : 'rw';
  const prop = flags.find((o) => PROPAGATION.has(o) && o !== 'rprivate');
  return [trimSlash(src), trimSlash(dst), mode, ...(prop ? [prop] : [])].join(':');
}

const capKey = (c: string): string => c.toUpperCase().replace(/^CAP_/, '');

function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null || v === '' || v === false || v === 0) return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && Object.keys(v).length === 0;
}

/** One comparable form per key, so that the engine's spellings of "nothing" and of defaults match. */
function normalize(key: string, v: unknown): unknown {
  if (isEmpty(v)) return null;
  switch (key) {
    case 'Binds':
      return (v as string[]).map(bindKey).sort();
    case 'CapAdd':
    case 'CapDrop':
      return (v as string[]).map(capKey).sort();
    case 'SecurityOpt':
      return [...(v as string[])].sort();
    case 'Ulimits':
      return (v as { Name: string; Soft: number; Hard: number }[])
        .map((u) => `${ulimitName(u.Name)}=${u.Soft}:${u.Hard}`)
        .sort();
    case 'Devices':
      return (v as { PathOnHost: string; PathInContainer: string; CgroupPermissions: string }[])
        .map((d) => `${d.PathOnHost}:${d.PathInContainer}:${d.CgroupPermissions}`)
        .sort();
    case 'PidMode':
    case 'UTSMode':
    case 'CgroupnsMode':
      return v === 'private' ? null : v;
    case 'IpcMode':
      // Docker's own default is "private" or "shareable", by daemon setting: neither is chosen.
      return v === 'private' || v === 'shareable' ? null : v;
    case 'NetworkMode':
      return v === 'default' ? 'bridge' : v;
    default:
      return v;
  }
}

/**
 * Whether a container sees /proc unmasked and /proc/sys writable: what
 * `--security-opt systempaths=unconfined` asks for, which reaches the engine
 * as empty MaskedPaths and ReadonlyPaths (create-options.ts), not as a
 * SecurityOpt. A privileged container is never masked: the question does
 * not apply to it.
 */
export function unconfinedPaths(h: Record<string, unknown>): boolean {
  const empty = (v: unknown): boolean => Array.isArray(v) && v.length === 0;
  return h.Privileged !== true && empty(h.MaskedPaths) && empty(h.ReadonlyPaths);
}

const show = (v: unknown): string => (v === null ? 'none' : JSON.stringify(v));

function envMap(list: readonly string[] | null | undefined): Map<string, string> {
  const m = new Map<string, string>();
  for (const e of list ?? []) {
    const i = e.indexOf('=');
    m.set(i < 0 ? e : e.slice(0, i), i < 0 ? '' : e.slice(i + 1));
  }
  return m;
}

function envDifferences(body: CreateBody, running: InspectedRuntime, image: ImageDefaults): string[] {
  const want = envMap(body.Env);
  const have = envMap(running.Config.Env);
  const fromImage = envMap(image.Env);
  const out: string[] = [];
  for (const [k, v] of want) {
    if (have.get(k) !== v)
      out.push(`environment.${k}: definition ${show(v)}, running ${show(have.get(k) ?? null)}`);
  }
  for (const [k, v] of have) {
    if (!want.has(k) && fromImage.get(k) !== v)
      out.push(`environment.${k}: definition none, running ${show(v)}`);
  }
  return out;
}

/**
 * The process a definition starts (command, entrypoint, user) against the
 * running one's. A definition that leaves one to the image is compared with
 * the image's own: a container created with another command (kolla-ansible's
 * `command:`) would lose it when spcd replaced it.
 */
function processDifferences(body: CreateBody, running: InspectedRuntime, image: ImageDefaults): string[] {
  // As the engine merges them: an entrypoint of the definition's own drops the image's command.
  const cmd = body.Cmd ?? (body.Entrypoint ? null : (image.Cmd ?? null));
  const rows = [
    ['command', body.Cmd !== undefined, cmd, running.Config.Cmd],
    [
      'entrypoint',
      body.Entrypoint !== undefined,
      body.Entrypoint ?? image.Entrypoint ?? null,
      running.Config.Entrypoint,
    ],
    ['user', body.User !== undefined, body.User ?? image.User ?? '', running.Config.User ?? ''],
  ] as const;
  const out: string[] = [];
  for (const [key, own, want, have] of rows) {
    if (JSON.stringify(normalizeProcess(want)) === JSON.stringify(normalizeProcess(have))) continue;
    out.push(
      `${key}: definition ${own ? '' : "the image's "}${show(normalizeProcess(want))}, running ${show(normalizeProcess(have ?? null))}`,
    );
  }
  return out;
}

/** "" and [] and null are one "nothing". */
const normalizeProcess = (
  v: string | readonly string[] | null | undefined,
): string | readonly string[] | null =>
  v === undefined || v === '' || (Array.isArray(v) && v.length === 0) ? null : v;

/**
 * Every way a running container differs from the create body of its
 * definition, one line each ("key: definition X, running Y"); empty when
 * the definition reproduces it. Pure: unit-tested without an engine.
 */
export function runtimeDifferences(
  spec: ContainerSpec,
  body: CreateBody,
  running: InspectedRuntime,
  image: ImageDefaults,
): string[] {
  const out: string[] = [];
  if (hasKollaConfig(spec))
    out.push('config: the definition has spcd render its config; the running container binds its own');
  if (body.Image !== running.Config.Image)
    out.push(`image: definition ${show(body.Image)}, running ${show(running.Config.Image)}`);
  out.push(...processDifferences(body, running, image));
  out.push(...envDifferences(body, running, image));
  const devpts = devptsTargets(running.Mounts);
  const binds = running.HostConfig.Binds;
  const host: Readonly<Record<string, unknown>> = {
    ...running.HostConfig,
    Binds: Array.isArray(binds) ? bindsWithoutDevpts(binds as string[], devpts) : binds,
  };
  for (const [key, yamlKey] of HOST_KEYS) {
    if (body.HostConfig[key] === undefined && ENGINE_DEFAULTS.has(key)) continue;
    const want = normalize(key, body.HostConfig[key]);
    const have = normalize(key, host[key]);
    if (JSON.stringify(want) !== JSON.stringify(have))
      out.push(`${yamlKey}: definition ${show(want)}, running ${show(have)}`);
  }
  const wantDevpts = [...spec.devpts].sort();
  if (JSON.stringify(wantDevpts) !== JSON.stringify(devpts))
    out.push(`devpts: definition ${show(wantDevpts)}, running ${show(devpts)}`);
  const [want, have] = [unconfinedPaths(body.HostConfig), unconfinedPaths(running.HostConfig)];
  if (want !== have)
    out.push(
      `security_opt systempaths=unconfined: definition ${want ? 'yes' : 'no'}, running ${have ? 'yes' : 'no'}`,
    );
  const policy = (running.HostConfig.RestartPolicy as { Name?: string } | undefined)?.Name ?? '';
  if (policy !== '' && policy !== 'no')
    out.push(
      `restart policy: running ${show(policy)}, so Docker would restart it beside spcd; set it to "no" first`,
    );
  return out;
}
