/**
 * Pure domain types for container sets. These are the *validated, normalized*
 * forms that spec/ produces from YAML: units converted, defaults filled, lists
 * in a canonical order. Everything downstream (planner, engine, hash) works on
 * these and never on raw YAML.
 */

import type { ContainerOptions } from './container-fields.js';

export type Propagation = 'rprivate' | 'private' | 'rshared' | 'shared' | 'rslave' | 'slave';

/**
 * A host folder or file bound in. It has no `kind` key: its normalized (and
 * so its hashed) form is the one spcd has always written, so no container of
 * a definition without volumes is recreated by an spcd that knows volumes.
 */
export interface HostBindMount {
  readonly kind?: undefined;
  /** Absolute host path. */
  readonly source: string;
  /** Absolute path inside the container. */
  readonly target: string;
  readonly readOnly: boolean;
  readonly propagation?: Propagation;
}

/**
 * A Docker named volume (kolla's `kolla_logs:/var/log/kolla/`): spcd makes
 * sure it exists before a container that binds it is created, and never
 * removes it. Docker applies no propagation to a volume.
 */
export interface VolumeBindMount {
  readonly kind: 'volume';
  /** The volume's name (VOLUME_NAME). */
  readonly source: string;
  /** Absolute path inside the container. */
  readonly target: string;
  readonly readOnly: boolean;
}

export type BindMount = HostBindMount | VolumeBindMount;

/** Docker's rule for a volume name (daemon/names: RestrictedNamePattern). */
export const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

export function isVolumeBind(b: BindMount): b is VolumeBindMount {
  return b.kind === 'volume';
}

/** The names of the volumes a container binds, each once, sorted. */
export function volumeNames(spec: Pick<ContainerSpec, 'binds'>): string[] {
  return [...new Set(spec.binds.filter(isVolumeBind).map((b) => b.source))].sort();
}

export interface TmpfsMount {
  readonly target: string;
  /** Mount options as docker takes them, e.g. "size=64m,mode=1777". */
  readonly options: string;
}

export interface DeviceMapping {
  readonly host: string;
  readonly container: string;
  /** cgroup permissions, e.g. "rwm". */
  readonly permissions: string;
}

export interface Ulimit {
  readonly name: string;
  readonly soft: number;
  readonly hard: number;
}

/** Namespace modes. "private" is the engine default and is omitted from create. */
export type PidMode = 'host' | 'private';
export type IpcMode = 'host' | 'private' | 'shareable';
export type UtsMode = 'host' | 'private';
export type CgroupnsMode = 'host' | 'private';
/** "host", "none", "bridge" or a user network name. */
export type NetworkMode = string;

export type CheckAction = 'restart' | 'stop' | 'none';

/** How a check is run. */
export type CheckProbe =
  | { readonly kind: 'exec'; readonly argv: readonly string[] }
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }
  | {
      readonly kind: 'http';
      readonly url: string;
      /** Status codes counted as success; empty means 200-399. */
      readonly expectStatus: readonly number[];
    }
  | {
      readonly kind: 'process';
      /** Matched against /proc/<pid>/comm (exact) of processes in the container's PID view. */
      readonly comm: string;
    }
  | {
      /**
       * Kolla's `healthcheck_port` meaning: a process of the container named
       * `process` (its comm, or the base name of its program or script) has an
       * ESTABLISHED TCP connection whose local or remote port is one of `ports`.
       * Run from the host's /proc when the container shares the host's PID or
       * network namespace, else through exec of healthchecks/healthcheck_port.
       */
      readonly kind: 'established';
      readonly process: string;
      readonly ports: readonly number[];
    };

export type CheckSchedule =
  | { readonly kind: 'interval'; readonly intervalMs: number }
  | { readonly kind: 'cron'; readonly expression: string };

export interface CheckSpec {
  /** Unique inside its container. */
  readonly name: string;
  readonly probe: CheckProbe;
  readonly schedule: CheckSchedule;
  readonly timeoutMs: number;
  readonly startPeriodMs: number;
  /**
   * Within the start period and until the first success: the check runs at
   * once, then this often instead of its interval (Docker's start_interval).
   * Absent: the interval, with the first run jittered.
   */
  readonly startIntervalMs?: number;
  readonly failureThreshold: number;
  readonly successThreshold: number;
  readonly action: CheckAction;
  readonly maxOutputBytes: number;
  /**
   * The check tells whether a service outside the container (RabbitMQ, the
   * database) is reachable, not whether the container is alive: its action is
   * `none`, it is reported as that dependency's state and it takes no part in
   * the container's health or an upgrade's health gate (docs/reference/health-checks.md,
   * docs/decisions/0034-dependency-checks.md). Absent: a liveness check.
   */
  readonly dependency?: string;
}

/** A check that watches a dependency outside its container (CheckSpec.dependency). */
export function isDependencyCheck(check: Pick<CheckSpec, 'dependency'>): boolean {
  return check.dependency !== undefined;
}

/** A config file rendered from a template into the container's config dir (issue #6). */
export interface ConfigFileSpec {
  /** Template path relative to the templates directory. */
  readonly template: string;
  /** Destination relative to the container's config directory. */
  readonly dest: string;
  /** Where kolla's set_configs copies it inside the container. */
  readonly containerPath: string;
  readonly owner: string;
  readonly mode: string;
  /** How values are escaped/validated: decided from the file name when absent. */
  readonly format: 'ini' | 'yaml' | 'json' | 'text';
  /** Kolla's per-file flags, written to config.json only when set (absent = false). */
  readonly optional?: boolean;
  readonly merge?: boolean;
  /** Kolla copies the source's owner and mode; owner and perm are left out of config.json. */
  readonly preserveProperties?: boolean;
}

/** One entry of Kolla's config.json `permissions`: applied by kolla_set_configs at every start. */
export interface KollaPermission {
  /** Absolute path (or glob) inside the container. */
  readonly path: string;
  /** "user" or "user:group", resolved by name inside the container. */
  readonly owner: string;
  /** Four octal digits; absent = ownership only. */
  readonly perm?: string;
  readonly recurse: boolean;
}

/** A one-shot task run before first start and before each upgrade (issue #6). */
export interface BootstrapTaskSpec {
  readonly name: string;
  /**
   * Replaces the container's command. Absent: the container starts as it
   * would normally (for a Kolla image: kolla_start, so kolla_set_configs runs
   * and config.json's command is executed) with `environment` added, e.g.
   * KOLLA_BOOTSTRAP for a db sync.
   */
  readonly command?: readonly string[];
  /** Added to the container's environment for this task only; absent = none. */
  readonly environment?: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly acceptExitCodes: readonly number[];
}

/**
 * The domain census of a hypervisor container (issue 12): listed before spcd
 * stops it and after the new instance is up; a difference is reported.
 */
export interface CensusSpec {
  /** Run in the container; prints one running domain per line (`virsh list --uuid`). */
  readonly argv: readonly string[];
  /** Deadline of one listing before the stop; after the start, listings are retried until it passes. */
  readonly timeoutMs: number;
}

/**
 * One container, validated and normalized: its options come from the field
 * table (model/container-fields.ts), where each one's YAML key, default,
 * normalization and engine mapping are declared.
 */
export type ContainerSpec = ContainerOptions & {
  /** The docker container name; unique on the host. */
  readonly name: string;
  /** Slash-separated path of the owning set, e.g. "compute/neutron". */
  readonly set: string;
  /** Where it came from, for error messages: "container-sets/compute.yaml:12". */
  readonly source: string;
};

export interface SetSpec {
  /** Last path element. */
  readonly name: string;
  /** Full slash path, e.g. "compute" or "compute/neutron". */
  readonly path: string;
  readonly description: string;
  /** Template defaults shipped with the set (lowest precedence). */
  readonly defaults: Readonly<Record<string, unknown>>;
  readonly containers: readonly ContainerSpec[];
  readonly sets: readonly SetSpec[];
  readonly source: string;
}

/** Everything spcd should keep running on this host. */
export interface DesiredState {
  readonly sets: readonly SetSpec[];
  /** Template values from the per-host override file (`values:`), highest precedence (issue #6). */
  readonly hostValues?: Readonly<Record<string, unknown>>;
}

/** All containers of a tree of sets, depth first, in file order. */
export function allContainers(sets: readonly SetSpec[]): ContainerSpec[] {
  const out: ContainerSpec[] = [];
  const walk = (s: SetSpec): void => {
    out.push(...s.containers);
    s.sets.forEach(walk);
  };
  sets.forEach(walk);
  return out;
}

export function findSet(sets: readonly SetSpec[], path: string): SetSpec | undefined {
  for (const s of sets) {
    if (s.path === path) return s;
    const inner = findSet(s.sets, path);
    if (inner) return inner;
  }
  return undefined;
}

/** Where the shipped check scripts (healthchecks/) are mounted read-only in a container. */
export const HEALTHCHECKS_MOUNT = '/spcd/healthchecks';

/** True when spcd writes a Kolla config.json for the container (config files or permissions). */
export function hasKollaConfig(spec: Pick<ContainerSpec, 'config' | 'permissions'>): boolean {
  return spec.config.length > 0 || (spec.permissions?.length ?? 0) > 0;
}

/**
 * An `established` check runs from the host's /proc when the host can see the
 * container's processes and their sockets as the container does: a shared PID
 * or network namespace. Otherwise it runs in the container, as Kolla's does.
 */
export function establishedRunsOnHost(spec: Pick<ContainerSpec, 'pid' | 'network'>): boolean {
  return spec.pid === 'host' || spec.network === 'host';
}

/** The exec form of an `established` check: the shipped script, Kolla's argument order. */
export function establishedArgv(process: string, ports: readonly number[]): string[] {
  return [`${HEALTHCHECKS_MOUNT}/healthcheck_port`, process, ...ports.map(String)];
}
