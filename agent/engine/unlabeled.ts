import type Dockerode from 'dockerode';
import { SpcdError } from '../errors.js';
import type { UnlabeledContainer } from '../model/adoption.js';
import { decodeIdentity, LABEL } from '../model/labels.js';
import type { EngineState, ObservedContainer } from '../model/observed.js';
import {
  bindKey,
  runtimeDifferences,
  unconfinedPaths,
  type ImageDefaults,
  type InspectedRuntime,
} from './adopt-diff.js';
import { createBody } from './create-options.js';
import { bindsWithoutDevpts, devptsTargets, ulimitName } from './dialect.js';
import { DEADLINES } from './deadlines.js';
import { withDeadline } from './map-error.js';
import type { CallOptions, CreateRequest } from './types.js';

interface Inspected extends InspectedRuntime {
  readonly Id: string;
  readonly Name: string;
  readonly Image: string;
  readonly Config: InspectedRuntime['Config'] & { readonly Labels?: Record<string, string> | null };
  readonly State: {
    Status: string;
    Pid: number;
    ExitCode: number;
    StartedAt: string;
    FinishedAt: string;
  };
}

const ZERO_TIME = '0001-01-01T00:00:00Z';

async function inspectRaw<T>(
  what: string,
  ms: number,
  o: CallOptions | undefined,
  fn: (s: AbortSignal) => Promise<unknown>,
): Promise<T | undefined> {
  try {
    return (await withDeadline(what, ms, o?.signal, fn)) as T;
  } catch (err) {
    if (err instanceof SpcdError && err.code === 'ENGINE_NOT_FOUND') return undefined;
    throw err;
  }
}

async function inspectContainer(
  docker: Dockerode,
  name: string,
  o?: CallOptions,
): Promise<Inspected | undefined> {
  const info = await inspectRaw<Inspected>(`inspect ${name}`, DEADLINES.inspect, o, (abortSignal) =>
    docker.getContainer(name).inspect({ abortSignal } as object),
  );
  // A container that carries an spcd identity is not unlabeled (another instance's is not ours either).
  if (!info || decodeIdentity(info.Config.Labels ?? undefined)) return undefined;
  return info;
}

/** What the image sets itself (environment, command, entrypoint, user). */
async function imageDefaults(docker: Dockerode, image: string, o?: CallOptions): Promise<ImageDefaults> {
  const info = await inspectRaw<{ Config?: ImageDefaults | null }>(
    `inspect image ${image.slice(0, 19)}`,
    DEADLINES.imageInspect,
    o,
    (abortSignal) => docker.getImage(image).inspect({ abortSignal } as object),
  );
  return info?.Config ?? {};
}

/**
 * The container under `name` when it carries no spcd identity, with every
 * way it differs from `expected` (its definition's create request);
 * undefined when there is none, or it is spcd's.
 */
export async function inspectUnlabeled(
  docker: Dockerode,
  name: string,
  expected: CreateRequest | undefined,
  o?: CallOptions,
): Promise<UnlabeledContainer | undefined> {
  const info = await inspectContainer(docker, name, o);
  if (!info) return undefined;
  const differences = expected
    ? runtimeDifferences(
        expected.spec,
        createBody(expected),
        info,
        await imageDefaults(docker, info.Image, o),
      )
    : [];
  return { ...engineFacts(info), differences };
}

/** What the engine says of a container, identity aside: the same fields for a labelled one and an unlabeled one. */
export function engineFacts(info: {
  Id: string;
  Name: string;
  Image: string;
  Config: { Image: string; Labels?: Record<string, string> | null };
  State: { Status: string; Pid: number; ExitCode: number; StartedAt: string; FinishedAt: string };
}): Omit<ObservedContainer, 'identity' | 'dockerHealth'> {
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ''),
    state: info.State.Status as EngineState,
    // The reference spcd created it from; Podman's Config.Image is the name it resolved that to.
    image: info.Config.Labels?.[LABEL.image] ?? info.Config.Image,
    imageId: info.Image,
    startedAt: info.State.StartedAt === ZERO_TIME ? '' : info.State.StartedAt,
    finishedAt: info.State.FinishedAt === ZERO_TIME ? '' : info.State.FinishedAt,
    exitCode: info.State.ExitCode,
    pid: info.State.Pid,
  };
}

const sameList = (
  a: readonly string[] | null | undefined,
  b: readonly string[] | null | undefined,
): boolean => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);

/**
 * The command, entrypoint and user the container was created with, where
 * they are not the image's own (kolla-ansible's `command:` is one): a
 * replacement made from the entry starts the same process.
 */
export function scannedProcess(c: InspectedRuntime['Config'], image: ImageDefaults): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const ownEntrypoint = !sameList(c.Entrypoint, image.Entrypoint);
  if (ownEntrypoint) out.entrypoint = c.Entrypoint ?? [];
  // An entrypoint of its own drops the image's command: the running one is the container's choice.
  if ((ownEntrypoint && (c.Cmd ?? []).length > 0) || (!ownEntrypoint && !sameList(c.Cmd, image.Cmd)))
    out.command = c.Cmd ?? [];
  if ((c.User ?? '') !== (image.User ?? '')) out.user = c.User ?? '';
  return out;
}

/** A bind as a set file writes it: no trailing slashes, ",propagation" after the mode. */
function bindText(b: string): string {
  const [src, dst, mode, prop] = bindKey(b).split(':');
  return `${src}:${dst}:${mode}${prop ? `,${prop}` : ''}`;
}

/**
 * A container-set entry that reproduces an unlabeled container, in the
 * YAML keys of docs/container-sets.md: what the engine holds, minus the
 * image's own environment. For the operator to review; undefined when
 * there is no such unlabeled container.
 */
/**
 * The container's security options as a definition writes them: the
 * engine's SecurityOpt, plus systempaths=unconfined where /proc is
 * unmasked (the CLI's word for empty MaskedPaths and ReadonlyPaths), or a
 * replacement would mask what the running one uses.
 */
export function scannedSecurityOpt(h: Record<string, unknown>): string[] {
  const engine = Array.isArray(h.SecurityOpt) ? (h.SecurityOpt as string[]) : [];
  return [...engine, ...(unconfinedPaths(h) ? ['systempaths=unconfined'] : [])];
}

export async function describeUnlabeled(
  docker: Dockerode,
  name: string,
  o?: CallOptions,
): Promise<Record<string, unknown> | undefined> {
  const info = await inspectContainer(docker, name, o);
  if (!info) return undefined;
  const image = await imageDefaults(docker, info.Image, o);
  const fromImage = new Set(image.Env ?? []);
  const h = info.HostConfig as Record<string, unknown>;
  const list = (v: unknown): string[] => (Array.isArray(v) ? (v as string[]) : []);
  const out: Record<string, unknown> = { image: info.Config.Image };
  const env = list(info.Config.Env).filter((e) => !fromImage.has(e));
  if (env.length > 0)
    out.environment = Object.fromEntries(
      env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
    );
  Object.assign(out, scannedProcess(info.Config, image));
  if (h.Privileged === true) out.privileged = true;
  for (const [key, yaml] of [
    ['PidMode', 'pid'],
    ['NetworkMode', 'network'],
    ['IpcMode', 'ipc'],
    ['UTSMode', 'uts'],
    ['CgroupnsMode', 'cgroupns'],
  ] as const) {
    const v = h[key];
    if (typeof v === 'string' && v !== '' && v !== 'private' && v !== 'shareable' && v !== 'default')
      out[yaml] = v;
  }
  const devpts = devptsTargets(info.Mounts);
  const binds = bindsWithoutDevpts(list(h.Binds), devpts);
  if (binds.length > 0) out.binds = binds.map(bindText);
  if (devpts.length > 0) out.devpts = devpts;
  if (list(h.CapAdd).length > 0) out.cap_add = list(h.CapAdd);
  if (list(h.CapDrop).length > 0) out.cap_drop = list(h.CapDrop);
  const securityOpt = scannedSecurityOpt(h);
  if (securityOpt.length > 0) out.security_opt = securityOpt;
  const devices = (h.Devices ?? []) as {
    PathOnHost: string;
    PathInContainer: string;
    CgroupPermissions: string;
  }[];
  if (devices.length > 0)
    out.devices = devices.map((d) => `${d.PathOnHost}:${d.PathInContainer}:${d.CgroupPermissions}`);
  const ulimits = (h.Ulimits ?? []) as { Name: string; Soft: number; Hard: number }[];
  if (ulimits.length > 0)
    out.ulimits = Object.fromEntries(
      ulimits.map((u) => [ulimitName(u.Name), { soft: u.Soft, hard: u.Hard }]),
    );
  const tmpfs = (h.Tmpfs ?? {}) as Record<string, string>;
  if (Object.keys(tmpfs).length > 0)
    out.tmpfs = Object.entries(tmpfs).map(([t, opt]) => (opt ? `${t}:${opt}` : t));
  const sysctls = (h.Sysctls ?? {}) as Record<string, string>;
  if (Object.keys(sysctls).length > 0) out.sysctls = sysctls;
  return out;
}
