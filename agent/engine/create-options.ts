import { FIELD_ROWS, type CustomEngineField } from '../model/container-fields.js';
import { encodeIdentity, LABEL } from '../model/labels.js';
import { hasKollaConfig, type BindMount, type ContainerSpec } from '../model/spec.js';
import type { CreateRequest } from './types.js';

/** The docker create body for a spec: pure, so it is unit-tested without an engine. */
export interface CreateBody {
  name: string;
  Image: string;
  Cmd?: string[];
  Entrypoint?: string[];
  User?: string;
  WorkingDir?: string;
  Env: string[];
  Labels: Record<string, string>;
  StopSignal: string;
  StopTimeout: number;
  HostConfig: Record<string, unknown>;
}

/** A bind as the engine's Binds take it: a host path or a volume name as the source. */
export function bindString(b: BindMount): string {
  const opts = [b.readOnly ? 'ro' : 'rw'];
  if (b.kind !== 'volume' && b.propagation) opts.push(b.propagation);
  return `${b.source}:${b.target}:${opts.join(',')}`;
}

const SYSTEMPATHS_UNCONFINED = 'systempaths=unconfined';

/**
 * The options the field table (model/container-fields.ts) marks 'custom':
 * the compiler wants one mapper each. Every other engine option is copied to
 * the HostConfig or body key its row names.
 */
const CUSTOM: {
  readonly [F in CustomEngineField]: (s: ContainerSpec, req: CreateRequest, body: CreateBody) => void;
} = {
  // With rendered kolla config, the image's kolla_start runs and reads the
  // command from config.json; the definition's command is not the Cmd.
  command: (s, _req, body) => {
    if (!hasKollaConfig(s) && s.command) body.Cmd = [...s.command];
  },
  environment: (s, req, body) => {
    const env = { ...s.environment, ...(req.extraEnv ?? {}) };
    body.Env = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  },
  binds: (s, req, body) => {
    body.HostConfig.Binds = [...s.binds.map(bindString), ...(req.extraBinds ?? []).map((b) => bindString(b))];
  },
  tmpfs: (s, _req, body) => {
    body.HostConfig.Tmpfs = Object.fromEntries(s.tmpfs.map((t) => [t.target, t.options]));
  },
  // Podman's Docker-compatible API takes a devpts mount in Mounts; Docker refuses the type.
  devpts: (s, _req, body) => {
    if (s.devpts.length > 0) body.HostConfig.Mounts = s.devpts.map((t) => ({ Type: 'devpts', Target: t }));
  },
  devices: (s, _req, body) => {
    body.HostConfig.Devices = s.devices.map((d) => ({
      PathOnHost: d.host,
      PathInContainer: d.container,
      CgroupPermissions: d.permissions,
    }));
  },
  // `docker run --security-opt systempaths=unconfined` is the CLI's own: the
  // engine refuses it as a SecurityOpt; the CLI sends empty MaskedPaths and
  // ReadonlyPaths instead (a writable /proc/sys, nothing masked in /proc).
  securityOpt: (s, _req, body) => {
    body.HostConfig.SecurityOpt = s.securityOpt.filter((o) => o !== SYSTEMPATHS_UNCONFINED);
    if (s.securityOpt.includes(SYSTEMPATHS_UNCONFINED)) {
      body.HostConfig.MaskedPaths = [];
      body.HostConfig.ReadonlyPaths = [];
    }
  },
  ulimits: (s, _req, body) => {
    body.HostConfig.Ulimits = s.ulimits.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard }));
  },
  labels: (s, req, body) => {
    body.Labels = {
      ...s.labels,
      ...(req.extraLabels ?? {}),
      ...encodeIdentity(req.identity),
      [LABEL.image]: s.image,
    };
  },
  stopGraceMs: (s, _req, body) => {
    body.StopTimeout = Math.ceil(s.stopGraceMs / 1000);
  },
};

function copy(value: unknown): unknown {
  if (Array.isArray(value)) return [...(value as unknown[])];
  if (value !== null && typeof value === 'object') return { ...value };
  return value;
}

export function createBody(req: CreateRequest): CreateBody {
  const s = req.spec;
  const body: CreateBody = {
    name: req.name ?? s.name,
    Image: s.image,
    Env: [],
    Labels: {},
    StopSignal: s.stopSignal,
    StopTimeout: 0,
    HostConfig: {
      // spcd is the only supervisor: Docker never restarts these (docs/decisions/0003).
      RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    },
  };
  const top = body as unknown as Record<string, unknown>;
  for (const [field, def] of FIELD_ROWS) {
    const target = def.engine;
    if (target === 'none') continue;
    if (target === 'custom') {
      CUSTOM[field as CustomEngineField](s, req, body);
      continue;
    }
    const value = s[field];
    if (value === undefined) continue;
    if ('host' in target) {
      if (!(target.omitDefault && value === def.default)) body.HostConfig[target.host] = copy(value);
    } else top[target.body] = copy(value);
  }
  // A task's command runs as it is, in place of the entrypoint too (the
  // image's or the definition's): a wrapper such as kolla_start would run
  // the service instead and ignore it.
  if (req.command) {
    body.Entrypoint = [...req.command];
    delete body.Cmd;
  }
  return body;
}
