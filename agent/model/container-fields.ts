import type {
  BindMount,
  BootstrapTaskSpec,
  CensusSpec,
  CheckSpec,
  ConfigFileSpec,
  DeviceMapping,
  KollaPermission,
  TmpfsMount,
  Ulimit,
} from './spec.js';
import { custom, type FieldDef, type ValueOf } from './field-kinds.js';

export type { FieldDef, ValueKind, CustomReaderName, CustomKind } from './field-kinds.js';

/**
 * The container options, one row each (docs/decisions/0019-field-table.md).
 * A row names the YAML key, how its value is read and normalized, its default,
 * whether it is hashed and where it goes in the engine's create body; from the
 * table come the ContainerSpec type (model/spec.ts), the reader (spec/fields.ts),
 * the hashed fields (model/hash.ts), the create body (engine/create-options.ts)
 * and the JSON Schema of set files (spec/schema.ts). Adding a plain option is
 * one row, its line in docs/reference/container-sets.md and a test.
 *
 * Row order is read order: a custom reader may use the fields read before it
 * (sysctls the namespaces, census the role).
 */

export const IMAGE_REF =
  /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
const USER = /^[A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?$/;
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]*$/;
const SIGNAL = /^SIG[A-Z0-9+-]+$/;
/** Docker's smallest memory limit. */
export const MIN_MEMORY = 6 * 1024 * 1024;
/** The label prefix spcd keeps for itself (model/labels.ts RESERVED_LABEL_PREFIX). */
const RESERVED = 'spcd.';

export const CONTAINER_FIELDS = {
  image: {
    key: 'image',
    value: {
      kind: 'string',
      pattern: IMAGE_REF,
      what: 'an image reference (e.g. kolla/nova-libvirt:2024.1)',
    },
    required: true,
    hash: true,
    engine: { body: 'Image' },
    doc: 'Image reference: [registry[:port]/]repository[:tag][@sha256:digest].',
  },
  command: {
    key: 'command',
    value: { kind: 'strings', nonEmpty: true },
    hash: true,
    engine: 'custom',
    doc: "The command, as a list (no shell splitting); with config, config.json's command.",
  },
  entrypoint: {
    key: 'entrypoint',
    value: { kind: 'strings', nonEmpty: true },
    hash: true,
    engine: { body: 'Entrypoint' },
    doc: "Replaces the image's entrypoint.",
  },
  user: {
    key: 'user',
    value: { kind: 'string', pattern: USER, what: 'a user[:group] name or id' },
    hash: true,
    engine: { body: 'User' },
    doc: 'user[:group], names or ids.',
  },
  workingDir: {
    key: 'working_dir',
    value: { kind: 'absPath' },
    hash: true,
    engine: { body: 'WorkingDir' },
    doc: 'Working directory inside the container (absolute).',
  },
  environment: {
    key: 'environment',
    value: {
      kind: 'textMap',
      keyPattern: ENV_KEY,
      what: 'an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
      lineSafe: true,
    },
    default: {},
    hash: true,
    engine: 'custom',
    doc: 'Environment variables; values are strings, numbers or booleans.',
  },
  privileged: {
    key: 'privileged',
    value: { kind: 'boolean' },
    default: false,
    hash: true,
    engine: { host: 'Privileged' },
    doc: 'docker --privileged.',
  },
  pid: {
    key: 'pid',
    value: { kind: 'oneOf', values: ['host', 'private'] },
    default: 'private',
    hash: 'unless-default',
    engine: { host: 'PidMode', omitDefault: true },
    doc: 'PID namespace.',
  },
  network: {
    key: 'network',
    value: custom<string>('network'),
    default: 'bridge',
    hash: true,
    engine: { host: 'NetworkMode' },
    doc: 'host, none, bridge or a network name.',
  },
  ipc: {
    key: 'ipc',
    value: { kind: 'oneOf', values: ['host', 'private', 'shareable'] },
    default: 'private',
    hash: 'unless-default',
    engine: { host: 'IpcMode' },
    doc: 'IPC namespace.',
  },
  uts: {
    key: 'uts',
    value: { kind: 'oneOf', values: ['host', 'private'] },
    default: 'private',
    hash: 'unless-default',
    engine: { host: 'UTSMode', omitDefault: true },
    doc: 'UTS namespace.',
  },
  cgroupns: {
    key: 'cgroupns',
    value: { kind: 'oneOf', values: ['host', 'private'] },
    default: 'private',
    hash: 'unless-default',
    engine: { host: 'CgroupnsMode' },
    doc: 'cgroup namespace.',
  },
  binds: {
    key: 'binds',
    value: custom<readonly BindMount[]>('binds'),
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'Bind mounts: "source:/target[:ro|rw][,propagation]" or {source, target, read_only, propagation}; source a host path or a named volume (no propagation).',
  },
  tmpfs: {
    key: 'tmpfs',
    value: custom<readonly TmpfsMount[]>('tmpfs'),
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'tmpfs mounts: "/target[:options]" or {target, options}.',
  },
  devpts: {
    key: 'devpts',
    value: custom<readonly string[]>('devpts'),
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'devpts mounts, Podman only: container paths (e.g. [/dev/pts]), each a new devpts instance, as kolla-ansible gives nova_libvirt on Podman.',
  },
  devices: {
    key: 'devices',
    value: custom<readonly DeviceMapping[]>('devices'),
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'Devices: "/host[:/container[:rwm]]" or {host, container, permissions}.',
  },
  capAdd: {
    key: 'cap_add',
    value: custom<readonly string[]>('capabilities'),
    default: [],
    hash: true,
    engine: { host: 'CapAdd' },
    doc: 'Capabilities to add (any case, CAP_ prefix optional, or ALL).',
  },
  capDrop: {
    key: 'cap_drop',
    value: custom<readonly string[]>('capabilities'),
    default: [],
    hash: true,
    engine: { host: 'CapDrop' },
    doc: 'Capabilities to drop (any case, CAP_ prefix optional, or ALL).',
  },
  securityOpt: {
    key: 'security_opt',
    value: { kind: 'strings' },
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'docker --security-opt values, as given; systempaths=unconfined as the docker CLI does it (no masked or read-only /proc paths).',
  },
  ulimits: {
    key: 'ulimits',
    value: custom<readonly Ulimit[]>('ulimits'),
    default: [],
    hash: true,
    engine: 'custom',
    doc: 'name: limit (soft = hard) or name: {soft, hard}; -1 is unlimited.',
  },
  sysctls: {
    key: 'sysctls',
    value: custom<Readonly<Record<string, string>>>('sysctls'),
    default: {},
    hash: true,
    engine: { host: 'Sysctls' },
    doc: 'Namespaced sysctls (net.*, IPC ones, kernel.domainname) the container has its own namespace for.',
  },
  memoryBytes: {
    key: 'memory',
    value: { kind: 'size', min: MIN_MEMORY },
    hash: true,
    engine: { host: 'Memory' },
    doc: 'Memory limit (e.g. 512m, 1g), at least 6m.',
  },
  shmSizeBytes: {
    key: 'shm_size',
    value: { kind: 'size', min: 1 },
    hash: true,
    engine: { host: 'ShmSize' },
    doc: 'Size of /dev/shm (e.g. 64m).',
  },
  pidsLimit: {
    key: 'pids_limit',
    value: { kind: 'integer', min: 1, max: 4_194_304 },
    hash: true,
    engine: { host: 'PidsLimit' },
    doc: "Most processes and threads the container may hold (its pids cgroup's pids.max).",
  },
  init: {
    key: 'init',
    value: { kind: 'boolean' },
    default: false,
    hash: true,
    engine: { host: 'Init' },
    doc: "Run docker's init as PID 1.",
  },
  labels: {
    key: 'labels',
    value: {
      kind: 'textMap',
      keyPattern: LABEL_KEY,
      what: 'a label key',
      reservedPrefix: RESERVED,
    },
    default: {},
    hash: true,
    engine: 'custom',
    doc: 'Container labels; keys starting with spcd. are reserved.',
  },
  stopSignal: {
    key: 'stop_signal',
    value: { kind: 'string', pattern: SIGNAL, what: 'a signal name like SIGTERM' },
    default: 'SIGTERM',
    hash: true,
    engine: { body: 'StopSignal' },
    doc: 'Signal that asks the container to stop.',
  },
  stopGraceMs: {
    key: 'stop_grace_period',
    value: { kind: 'duration', min: 0 },
    default: 10_000,
    hash: true,
    engine: 'custom',
    doc: 'Time between the stop signal and SIGKILL (e.g. 10s, 2m).',
  },
  dependsOn: {
    key: 'depends_on',
    value: custom<readonly string[]>('dependsOn'),
    default: [],
    hash: false,
    engine: 'none',
    doc: 'Containers of the same set that must be running first.',
  },
  role: {
    key: 'role',
    value: { kind: 'oneOf', values: ['service', 'hypervisor'] },
    default: 'service',
    hash: false,
    engine: 'none',
    doc: 'hypervisor marks the libvirt container: VM-safety rules apply to it.',
  },
  healthchecks: {
    key: 'healthchecks',
    value: custom<readonly CheckSpec[]>('healthchecks'),
    default: [],
    hash: false,
    engine: 'none',
    doc: 'Health checks (docs/reference/health-checks.md).',
  },
  config: {
    key: 'config',
    value: custom<readonly ConfigFileSpec[]>('config'),
    default: [],
    hash: false,
    engine: 'none',
    doc: "Config files rendered from templates into Kolla's config.json.",
  },
  permissions: {
    key: 'permissions',
    value: custom<readonly KollaPermission[]>('permissions'),
    hash: false,
    engine: 'none',
    doc: 'Kolla config.json permissions, applied by kolla_set_configs at every start.',
  },
  bootstrap: {
    key: 'bootstrap',
    value: custom<readonly BootstrapTaskSpec[]>('bootstrap'),
    default: [],
    hash: false,
    engine: 'none',
    doc: 'One-shot tasks run before the first start and before each upgrade.',
  },
  census: {
    key: 'census',
    value: custom<CensusSpec>('census'),
    hash: false,
    engine: 'none',
    doc: 'The domain census of the hypervisor container: {exec, timeout}.',
  },
} as const satisfies Record<string, FieldDef>;

export type ContainerFields = typeof CONTAINER_FIELDS;
export type FieldName = keyof ContainerFields;

type WithDefault = {
  [F in FieldName]: ContainerFields[F] extends { readonly default: unknown } ? F : never;
}[FieldName];
type Required_ = {
  [F in FieldName]: ContainerFields[F] extends { readonly required: true } ? F : never;
}[FieldName];

/** The options part of ContainerSpec: a field with a default (or required) is always there, the others are optional. */
export type ContainerOptions = {
  readonly [F in WithDefault | Required_]: ValueOf<ContainerFields[F]['value']>;
} & {
  readonly [F in Exclude<FieldName, WithDefault | Required_>]?: ValueOf<ContainerFields[F]['value']>;
};

/** Fields the create body maps by hand (engine/create-options.ts must have one mapper each). */
export type CustomEngineField = {
  [F in FieldName]: ContainerFields[F]['engine'] extends 'custom' ? F : never;
}[FieldName];

/** The rows in table order, typed for iteration. */
export const FIELD_ROWS = Object.entries(CONTAINER_FIELDS) as [FieldName, FieldDef][];
