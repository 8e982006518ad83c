import { CONTAINER_FIELDS, type CustomReaderName } from '../model/container-fields.js';
import { VOLUME_NAME, type ContainerSpec } from '../model/spec.js';
import { readBootstrap, BOOTSTRAP_KEYS } from './bootstrap.js';
import { readCensus, CENSUS_KEYS, CENSUS_MAX_TIMEOUT_MS } from './census.js';
import { CHECK_NAME, type CheckLibrary } from './check.js';
import { readChecks } from './check-schema.js';
import {
  ABS_PATH_SCHEMA,
  anyCase,
  DURATION_SCHEMA,
  DURATION_STRING,
  ints,
  LINE_SAFE_SCALAR,
  list,
  nonEmptyStrings,
  object,
  plainSchema,
  str,
  type JsonSchema,
} from './fields.js';
import { readSysctls, readUlimits, SYSCTL_KEY, ULIMIT_NAMES } from './kernel-params.js';
import {
  CONFIG_KEYS,
  FORMATS,
  GLOB_PATH,
  MODE,
  OWNER,
  PERM,
  PERMISSION_KEYS,
  readConfig,
  readPermissions,
} from './kolla-config.js';
import {
  BIND_KEYS,
  DEVICE_KEYS,
  DEVICE_PERMISSIONS,
  PROPAGATIONS,
  readBinds,
  readDevices,
  readDevpts,
  readTmpfs,
  TMPFS_KEYS,
  TMPFS_OPTIONS,
  VOLUME_BIND_KEYS,
  type MountTargets,
} from './mounts.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/**
 * The readers of the field table's `custom` values, each with the JSON Schema
 * of what it accepts, built from the same key lists and patterns. The
 * compiler makes every name of CustomReaderName have one.
 */

export const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
export const NETWORK_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** Linux capabilities (capabilities(7)), without the CAP_ prefix. */
export const CAPABILITIES: ReadonlySet<string> = new Set(
  (
    'ALL AUDIT_CONTROL AUDIT_READ AUDIT_WRITE BLOCK_SUSPEND BPF CHECKPOINT_RESTORE CHOWN DAC_OVERRIDE ' +
    'DAC_READ_SEARCH FOWNER FSETID IPC_LOCK IPC_OWNER KILL LEASE LINUX_IMMUTABLE MAC_ADMIN MAC_OVERRIDE ' +
    'MKNOD NET_ADMIN NET_BIND_SERVICE NET_BROADCAST NET_RAW PERFMON SETFCAP SETGID SETPCAP SETUID SYSLOG ' +
    'SYS_ADMIN SYS_BOOT SYS_CHROOT SYS_MODULE SYS_NICE SYS_PACCT SYS_PTRACE SYS_RAWIO SYS_RESOURCE ' +
    'SYS_TIME SYS_TTY_CONFIG WAKE_ALARM'
  ).split(' '),
);

/** What a custom reader sees of its container: the fields read before it, and its context. */
export interface FieldContext {
  readonly name: string;
  /** Full slash path of the owning set. */
  readonly set: string;
  /** Names of the other containers of the same set (for depends_on). */
  readonly siblings: ReadonlySet<string>;
  readonly library: CheckLibrary | undefined;
  /** The fields read so far (table order), defaults filled in. */
  readonly spec: Partial<ContainerSpec>;
  /** Targets of the binds and tmpfs mounts read so far. */
  readonly mountTargets: MountTargets;
}

export interface CustomReader {
  readonly read: (r: Reader, v: unknown, w: Where, ctx: FieldContext) => unknown;
  readonly schema: () => JsonSchema;
}

const REL_PATH: JsonSchema = {
  type: 'string',
  pattern: '^(?!/)(?!.*(?:^|/)\\.{1,2}(?:/|$))(?!.*//)[^\\u0000]+$',
};
/** A bootstrap task's environment is read as the container's. */
const ENV: JsonSchema = plainSchema(CONTAINER_FIELDS.environment.value);

function readNetwork(r: Reader, v: unknown, w: Where): string | undefined {
  if (typeof v !== 'string' || !NETWORK_NAME.test(v)) {
    r.fail(w, `must be host, none, bridge or a network name (got ${JSON.stringify(v)})`);
    return undefined;
  }
  return v;
}

/** Upper-case, without CAP_, known to Linux (or ALL), de-duplicated, sorted. */
function readCaps(r: Reader, v: unknown, w: Where): string[] | undefined {
  const names = r.strings(v, w);
  if (!names) return undefined;
  const out = new Set<string>();
  let ok = true;
  names.forEach((cap, i) => {
    const name = cap.trim().toUpperCase().replace(/^CAP_/, '');
    if (!CAPABILITIES.has(name)) {
      r.fail(r.child(v, i, w), `${JSON.stringify(cap)} is not a Linux capability`);
      ok = false;
    } else out.add(name);
  });
  return ok ? [...out].sort() : undefined;
}

function readDependsOn(r: Reader, v: unknown, w: Where, ctx: FieldContext): string[] | undefined {
  const names = r.strings(v, w);
  if (!names) return undefined;
  const seen = new Set<string>();
  let ok = true;
  names.forEach((dep, i) => {
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
  return ok ? names : undefined;
}

const BIND_SHORT = `^/[^:]*:/[^:]*(?::(?:ro|rw|${PROPAGATIONS.join('|')})(?:,(?:ro|rw|${PROPAGATIONS.join('|')}))*)?$`;
const VOLUME_NAME_PATTERN = VOLUME_NAME.source.slice(1, -1);
const VOLUME_SHORT = `^${VOLUME_NAME_PATTERN}:/[^:]*(?::(?:ro|rw))?$`;

export const CUSTOM_READERS: { readonly [N in CustomReaderName]: CustomReader } = {
  network: { read: readNetwork, schema: () => str(NETWORK_NAME) },
  capabilities: {
    read: readCaps,
    schema: () =>
      list({
        type: 'string',
        pattern: `^(?:${anyCase('CAP_')})?(?:${[...CAPABILITIES].map(anyCase).join('|')})$`,
      }),
  },
  binds: {
    read: (r, v, w, ctx) => readBinds(r, v, w, ctx.mountTargets),
    schema: () =>
      list({
        oneOf: [
          { type: 'string', pattern: BIND_SHORT },
          { type: 'string', pattern: VOLUME_SHORT },
          object(
            {
              source: ABS_PATH_SCHEMA,
              target: ABS_PATH_SCHEMA,
              read_only: { type: 'boolean' },
              propagation: { enum: [...PROPAGATIONS] },
            },
            BIND_KEYS,
            ['source', 'target'],
          ),
          object(
            {
              source: { type: 'string', pattern: `^${VOLUME_NAME_PATTERN}$` },
              target: ABS_PATH_SCHEMA,
              read_only: { type: 'boolean' },
            },
            VOLUME_BIND_KEYS,
            ['source', 'target'],
          ),
        ],
      }),
  },
  tmpfs: {
    read: (r, v, w, ctx) => readTmpfs(r, v, w, ctx.mountTargets),
    schema: () =>
      list({
        oneOf: [
          { type: 'string', pattern: `^/[^:]*(?::${TMPFS_OPTIONS.source.slice(1, -1)})?$` },
          object({ target: ABS_PATH_SCHEMA, options: { type: 'string' } }, TMPFS_KEYS, ['target']),
        ],
      }),
  },
  devpts: {
    read: (r, v, w, ctx) => readDevpts(r, v, w, ctx.mountTargets),
    schema: () => list({ type: 'string', pattern: '^/[^:]*$' }),
  },
  devices: {
    read: (r, v, w) => readDevices(r, v, w),
    schema: () =>
      list({
        oneOf: [
          { type: 'string', pattern: '^/[^:]*(?::/[^:]*(?::[rwm]{1,3})?)?$' },
          object(
            { host: ABS_PATH_SCHEMA, container: ABS_PATH_SCHEMA, permissions: str(DEVICE_PERMISSIONS) },
            DEVICE_KEYS,
            ['host'],
          ),
        ],
      }),
  },
  ulimits: {
    read: (r, v, w) => readUlimits(r, v, w),
    schema: () => ({
      type: 'object',
      propertyNames: { enum: [...ULIMIT_NAMES] },
      additionalProperties: {
        oneOf: [
          { type: 'integer', minimum: -1 },
          object(
            { soft: { type: 'integer', minimum: -1 }, hard: { type: 'integer', minimum: -1 } },
            ['soft', 'hard'],
            ['soft', 'hard'],
          ),
        ],
      },
    }),
  },
  sysctls: {
    read: (r, v, w, ctx) =>
      readSysctls(r, v, w, {
        network: ctx.spec.network ?? 'bridge',
        ipc: ctx.spec.ipc ?? 'private',
        uts: ctx.spec.uts ?? 'private',
      }),
    schema: () => ({
      type: 'object',
      propertyNames: { pattern: SYSCTL_KEY.source },
      additionalProperties: LINE_SAFE_SCALAR,
    }),
  },
  dependsOn: { read: readDependsOn, schema: () => ({ ...list(str(CONTAINER_NAME)), uniqueItems: true }) },
  healthchecks: {
    read: (r, v, w, ctx) => readChecks(r, v, w, ctx.library),
    schema: () => list({ $ref: '#/$defs/check' }),
  },
  config: {
    read: (r, v, w) => readConfig(r, v, w),
    schema: () =>
      list(
        object(
          {
            template: REL_PATH,
            dest: REL_PATH,
            container_path: ABS_PATH_SCHEMA,
            owner: str(OWNER),
            mode: str(MODE),
            format: { enum: [...FORMATS] },
            optional: { type: 'boolean' },
            merge: { type: 'boolean' },
            preserve_properties: { type: 'boolean' },
          },
          CONFIG_KEYS,
          ['template', 'dest', 'container_path'],
        ),
      ),
  },
  permissions: {
    read: (r, v, w) => readPermissions(r, v, w),
    schema: () =>
      list(
        object(
          { path: str(GLOB_PATH), owner: str(OWNER), perm: str(PERM), recurse: { type: 'boolean' } },
          PERMISSION_KEYS,
          ['path', 'owner'],
        ),
      ),
  },
  bootstrap: {
    read: (r, v, w) => readBootstrap(r, v, w),
    schema: () =>
      list({
        ...object(
          {
            name: str(CHECK_NAME),
            command: nonEmptyStrings,
            environment: ENV,
            timeout: DURATION_SCHEMA,
            accept_exit_codes: { ...ints(0, 255), minItems: 1 },
          },
          BOOTSTRAP_KEYS,
          ['name'],
        ),
        anyOf: [{ required: ['command'] }, { required: ['environment'] }],
      }),
  },
  census: {
    read: (r, v, w, ctx) => readCensus(r, v, w, ctx.spec.role ?? 'service'),
    schema: () =>
      object(
        {
          exec: nonEmptyStrings,
          timeout: {
            oneOf: [{ type: 'integer', minimum: 100, maximum: CENSUS_MAX_TIMEOUT_MS }, DURATION_STRING],
          },
        },
        CENSUS_KEYS,
        ['exec'],
      ),
  },
};
