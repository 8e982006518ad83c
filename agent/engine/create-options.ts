import { encodeIdentity } from '../model/labels.js';
import { hasKollaConfig, type BindMount } from '../model/spec.js';
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

export function bindString(b: Pick<BindMount, 'source' | 'target' | 'readOnly' | 'propagation'>): string {
  const opts = [b.readOnly ? 'ro' : 'rw'];
  if (b.propagation) opts.push(b.propagation);
  return `${b.source}:${b.target}:${opts.join(',')}`;
}

export function createBody(req: CreateRequest): CreateBody {
  const s = req.spec;
  const env = { ...s.environment, ...(req.extraEnv ?? {}) };
  const binds = [...s.binds.map(bindString), ...(req.extraBinds ?? []).map((b) => bindString(b))];
  // With rendered kolla config, the image's kolla_start runs and reads the
  // command from config.json; the definition's command is not the Cmd.
  const command = req.command ?? (hasKollaConfig(s) ? undefined : s.command);
  const hostConfig: Record<string, unknown> = {
    Privileged: s.privileged,
    NetworkMode: s.network,
    IpcMode: s.ipc,
    CgroupnsMode: s.cgroupns,
    Binds: binds,
    Tmpfs: Object.fromEntries(s.tmpfs.map((t) => [t.target, t.options])),
    Devices: s.devices.map((d) => ({
      PathOnHost: d.host,
      PathInContainer: d.container,
      CgroupPermissions: d.permissions,
    })),
    CapAdd: [...s.capAdd],
    CapDrop: [...s.capDrop],
    SecurityOpt: [...s.securityOpt],
    Ulimits: s.ulimits.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard })),
    Sysctls: { ...s.sysctls },
    Init: s.init,
    // spcd is the only supervisor: Docker never restarts these (docs/decisions/0003).
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
  };
  if (s.pid === 'host') hostConfig.PidMode = 'host';
  if (s.uts === 'host') hostConfig.UTSMode = 'host';
  if (s.memoryBytes !== undefined) hostConfig.Memory = s.memoryBytes;
  if (s.shmSizeBytes !== undefined) hostConfig.ShmSize = s.shmSizeBytes;
  const body: CreateBody = {
    name: req.name ?? s.name,
    Image: s.image,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: { ...s.labels, ...(req.extraLabels ?? {}), ...encodeIdentity(req.identity) },
    StopSignal: s.stopSignal,
    StopTimeout: Math.ceil(s.stopGraceMs / 1000),
    HostConfig: hostConfig,
  };
  if (command) body.Cmd = [...command];
  if (s.entrypoint) body.Entrypoint = [...s.entrypoint];
  if (s.user !== undefined) body.User = s.user;
  if (s.workingDir !== undefined) body.WorkingDir = s.workingDir;
  return body;
}
