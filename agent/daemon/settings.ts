import { isAbsolute, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { SpcdError } from '../errors.js';
import { formatMs, MAX_DURATION_MS, parseDuration } from '../model/units.js';
import { defaultReadOnlySocket } from '../model/sockets.js';
import { ETCD_FLAGS, type EtcdSettings } from '../etcd/settings.js';
import { fleetOf } from './fleet-settings.js';
import { engineChoice, engineSocket, type EngineChoice } from './engine-choice.js';
import { flagOrEnv, KUBE_FLAGS, type EnvFlag, type FlagValues } from '../model/flags.js';

/** The daemon's settings, compiled once from flags and environment (flags win). */
export interface Settings {
  readonly setsDir: string;
  readonly overridesFile: string | undefined;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly dockerSocket: string;
  /** The engine the operator named (--engine); undefined: whichever answers (auto). */
  readonly engine: EngineChoice | undefined;
  readonly instance: string;
  readonly templatesDir: string;
  readonly healthchecksDir: string;
  readonly globalsFile: string | undefined;
  readonly secretsFile: string | undefined;
  readonly configRoot: string;
  readonly registryAuthFile: string | undefined;
  /** The node's image policy file (docs/explanation/security.md#image-policy); undefined: every image allowed. */
  readonly imagePolicyFile: string | undefined;
  /** The command that asks the host's systemd about kolla-ansible's units (--systemctl), as words. */
  readonly systemctl: readonly string[];
  readonly adminGroup: string | undefined;
  /** The read-only API socket, or undefined when turned off (`--readonly-socket off`). */
  readonly readOnlySocketPath: string | undefined;
  /** Group that may use the read-only socket; undefined: our own group (root only). */
  readonly readOnlyGroup: string | undefined;
  readonly metricsListen: string | undefined;
  readonly relistMs: number;
  readonly gateDeadlineMs: number;
  readonly minReadyMs: number;
  readonly pullActivityTimeoutMs: number;
  readonly logLevel: string;
  readonly kubeconfig: string | undefined;
  readonly nodeName: string | undefined;
  /** Kubernetes integration is on with a kubeconfig, or in a pod (service host + NODE_NAME). */
  readonly kube: KubeSettings | undefined;
  /** Fleet rollouts through etcd (--etcd-endpoints), for hosts without Kubernetes; never with `kube`. */
  readonly etcd: EtcdSettings | undefined;
}

export interface KubeSettings {
  readonly namespace: string;
  readonly desiredConfigMap: string | undefined;
  readonly fleetSlots: number;
  /** --kube-insecure: a cluster reached over http:// or without checking its certificate is allowed (warned). */
  readonly insecure: boolean;
}

interface FlagDef extends EnvFlag {
  readonly help: string;
  readonly def?: string;
}

export const FLAGS: Record<string, FlagDef> = {
  sets: { env: 'SPCD_SETS', help: 'directory of container-set YAML files', def: '/etc/spcd/container-sets' },
  overrides: { env: 'SPCD_OVERRIDES', help: 'per-host override file (optional)' },
  'state-dir': { env: 'SPCD_STATE_DIR', help: 'state directory', def: '/var/lib/spcd' },
  socket: { env: 'SPCD_SOCKET', help: 'API unix socket', def: '/run/spcd/spcd.sock' },
  engine: {
    env: 'SPCD_ENGINE',
    help: 'the container engine: docker, podman, or auto (whichever answers on --docker-socket)',
    def: 'auto',
  },
  'docker-socket': {
    env: 'SPCD_DOCKER_SOCKET',
    help: "the engine's API socket (default /var/run/docker.sock; /run/podman/podman.sock with --engine podman)",
  },
  instance: { env: 'SPCD_INSTANCE', help: 'name this spcd labels its containers with', def: 'spcd' },
  templates: { env: 'SPCD_TEMPLATES', help: 'nunjucks templates directory' },
  healthchecks: {
    env: 'SPCD_HEALTHCHECKS',
    help: 'check scripts directory, mounted read-only in containers',
  },
  globals: { env: 'SPCD_GLOBALS', help: 'global values YAML (optional)' },
  secrets: { env: 'SPCD_SECRETS', help: 'secrets YAML, mode 0600 (optional)' },
  'config-root': { env: 'SPCD_CONFIG_ROOT', help: 'where rendered config lives (default STATE_DIR/config)' },
  'registry-auth': {
    env: 'SPCD_REGISTRY_AUTH',
    help: 'registry auth file, docker config.json format (optional)',
  },
  'image-policy': {
    env: 'SPCD_IMAGE_POLICY',
    help: 'YAML file of the registries/repositories (and digests) this node runs (optional; none: any image)',
  },
  systemctl: {
    env: 'SPCD_SYSTEMCTL',
    help: "command (words split on spaces) that asks the host's systemd about kolla-ansible's units before an adoption; in a pod: nsenter --target 1 --mount -- systemctl",
    def: 'systemctl',
  },
  'admin-group': { env: 'SPCD_ADMIN_GROUP', help: 'group that may use the API socket (optional)' },
  'readonly-socket': {
    env: 'SPCD_READONLY_SOCKET',
    help: "read-only API socket, or 'off' (default: the socket's directory + '-ro', same file name)",
  },
  'readonly-group': {
    env: 'SPCD_READONLY_GROUP',
    help: "group that may use the read-only socket (default: spcd's own group, so root only)",
  },
  'metrics-listen': {
    env: 'SPCD_METRICS_LISTEN',
    help: 'HOST:PORT for a read-only /metrics TCP listener (off by default)',
  },
  'relist-interval': { env: 'SPCD_RELIST_INTERVAL', help: 're-list period (events are hints)', def: '10s' },
  'gate-deadline': {
    env: 'SPCD_GATE_DEADLINE',
    help: 'how long a new generation may take to be healthy',
    def: '120s',
  },
  'min-ready': {
    env: 'SPCD_MIN_READY',
    help: 'a container without checks must stay up this long',
    def: '1s',
  },
  'pull-activity-timeout': {
    env: 'SPCD_PULL_ACTIVITY_TIMEOUT',
    help: 'a pull fails after this long without progress',
    def: '60s',
  },
  'log-level': { env: 'SPCD_LOG_LEVEL', help: 'pino level', def: 'info' },
  kubeconfig: {
    env: 'SPCD_KUBECONFIG',
    help: 'kubeconfig for Kubernetes reporting (optional; in-cluster when NODE_NAME is set)',
  },
  'node-name': {
    env: 'NODE_NAME',
    help: "this node's name in the fleet (Kubernetes Node; with etcd, default the hostname)",
  },
  'kube-namespace': {
    env: 'SPCD_KUBE_NAMESPACE',
    help: 'namespace of Leases, Events and the desired ConfigMap',
    def: 'spcd-system',
  },
  'kube-desired-configmap': {
    env: 'SPCD_KUBE_DESIRED_CONFIGMAP',
    help: 'ConfigMap with desired images for fleet upgrades (optional)',
  },
  'fleet-slots': {
    env: 'SPCD_FLEET_SLOTS',
    help: 'how many nodes may upgrade at once (Lease slots)',
    def: '1',
  },
  ...KUBE_FLAGS,
  ...ETCD_FLAGS,
};

export function usage(): string {
  const lines = ['usage: spcd [flags]', ''];
  for (const [name, d] of Object.entries(FLAGS)) {
    lines.push(`  --${name.padEnd(24)} ${d.help} (env ${d.env}${d.def ? `, default ${d.def}` : ''})`);
  }
  lines.push(
    `  --${'help'.padEnd(24)} this text`,
    `  --${'version'.padEnd(24)} print spcd's version and exit`,
  );
  return lines.join('\n');
}

/** The read-only socket's path: off, the default beside the admin socket's directory, or an absolute path of its own. */
function readOnlySocket(value: string | undefined, socketPath: string): string | undefined {
  if (value === 'off') return undefined;
  const path = value === undefined || value === '' ? defaultReadOnlySocket(socketPath) : value;
  if (!isAbsolute(path) || resolve(path) === socketPath) {
    throw new SpcdError(
      'SETTINGS_INVALID',
      "--readonly-socket must be an absolute path other than --socket, or 'off'",
      {
        flag: 'readonly-socket',
      },
    );
  }
  return resolve(path);
}

/** A command flag's words (split on spaces); SETTINGS_INVALID naming the flag when there are none. */
function commandWords(flag: string, value: string): string[] {
  const words = value.split(/\s+/).filter((w) => w !== '');
  if (words.length === 0) throw new SpcdError('SETTINGS_INVALID', `--${flag} must name a command`, { flag });
  return words;
}

/** Where the repository's shipped folders are, for defaults that point into it. */
export function repoRoot(): string {
  return resolve(new URL('.', import.meta.url).pathname, '..', '..');
}

export function parseSettings(argv: string[], env: NodeJS.ProcessEnv): Settings | 'help' | 'version' {
  const values = parseFlags(argv);
  if (values === 'help' || values === 'version') return values;
  const { get, path, duration } = flagReader(values, env);
  const instance = checkedInstance(get('instance') ?? 'spcd');
  const stateDir = path('state-dir', true) as string;
  const metrics = checkedMetricsListen(get('metrics-listen'));
  const socketPath = path('socket', true) as string;
  if (!isAbsolute(socketPath))
    throw new SpcdError('SETTINGS_INVALID', '--socket must be a path', { flag: 'socket' });
  const readOnlySocketPath = readOnlySocket(get('readonly-socket'), socketPath);
  const level = checkedLogLevel(get('log-level') ?? 'info');
  const fleet = fleetOf({ get, path }, env);
  const engine = engineChoice(get('engine') ?? 'auto');
  return {
    etcd: fleet.etcd,
    kube: fleet.kube,
    setsDir: path('sets', true) as string,
    overridesFile: path('overrides', false),
    stateDir,
    socketPath,
    dockerSocket: path('docker-socket', false) ?? engineSocket(engine),
    engine,
    instance,
    templatesDir: path('templates', false) ?? resolve(repoRoot(), 'templates'),
    healthchecksDir: path('healthchecks', false) ?? resolve(repoRoot(), 'healthchecks'),
    globalsFile: path('globals', false),
    secretsFile: path('secrets', false),
    configRoot: path('config-root', false) ?? resolve(stateDir, 'config'),
    registryAuthFile: path('registry-auth', false),
    imagePolicyFile: path('image-policy', false),
    systemctl: commandWords('systemctl', get('systemctl') ?? 'systemctl'),
    adminGroup: get('admin-group'),
    readOnlySocketPath,
    readOnlyGroup: get('readonly-group'),
    metricsListen: metrics,
    relistMs: duration('relist-interval'),
    gateDeadlineMs: duration('gate-deadline'),
    minReadyMs: duration('min-ready'),
    pullActivityTimeoutMs: duration('pull-activity-timeout'),
    logLevel: level,
    kubeconfig: fleet.kubeconfig,
    nodeName: fleet.nodeName,
  };
}

/** The command line, checked against FLAGS; 'help' or 'version' when asked for. */
function parseFlags(argv: string[]): FlagValues | 'help' | 'version' {
  const options = Object.fromEntries(
    Object.entries(FLAGS).map(([k, d]) => [
      k,
      { type: d.boolean ? ('boolean' as const) : ('string' as const) },
    ]),
  );
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean' }, version: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new SpcdError('SETTINGS_INVALID', `${(err as Error).message}\n${usage()}`);
  }
  if (parsed.values.help) return 'help';
  if (parsed.values.version) return 'version';
  return parsed.values as FlagValues;
}

/** Reads one flag: from the command line, else its environment variable, else its default. */
export interface FlagReader {
  get(k: string): string | undefined;
  /** An absolute path; SETTINGS_INVALID when required and not given. */
  path(k: string, required: boolean): string | undefined;
  /** Milliseconds; SETTINGS_INVALID unless a positive duration within the maximum. */
  duration(k: string): number;
}

function flagReader(values: FlagValues, env: NodeJS.ProcessEnv): FlagReader {
  const given = flagOrEnv(values, env, FLAGS);
  const get = (k: string): string | undefined => given(k) ?? FLAGS[k]?.def;
  const path = (k: string, required: boolean): string | undefined => {
    const v = get(k);
    if (v === undefined || v === '') {
      if (required) throw new SpcdError('SETTINGS_INVALID', `--${k} is required`, { flag: k });
      return undefined;
    }
    return resolve(v);
  };
  const duration = (k: string): number => {
    const v = get(k);
    const ms = parseDuration(v);
    if (ms === undefined || ms <= 0) {
      throw new SpcdError('SETTINGS_INVALID', `--${k}: '${v}' is not a duration like 10s or 500ms`, {
        flag: k,
        value: v,
      });
    }
    if (ms > MAX_DURATION_MS) {
      throw new SpcdError(
        'SETTINGS_INVALID',
        `--${k}: '${v}' is longer than the ${formatMs(MAX_DURATION_MS)} maximum`,
        { flag: k, value: v, maxMs: MAX_DURATION_MS },
      );
    }
    return ms;
  };
  return { get, path, duration };
}

function checkedInstance(instance: string): string {
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/.test(instance)) {
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--instance: '${instance}' must match [a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}`,
      {
        flag: 'instance',
      },
    );
  }
  return instance;
}

function checkedMetricsListen(metrics: string | undefined): string | undefined {
  if (metrics !== undefined && !/^[0-9a-zA-Z.:[\]-]+:[0-9]{1,5}$/.test(metrics)) {
    throw new SpcdError('SETTINGS_INVALID', `--metrics-listen: '${metrics}' must be HOST:PORT`, {
      flag: 'metrics-listen',
    });
  }
  return metrics;
}

function checkedLogLevel(level: string): string {
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(level)) {
    throw new SpcdError('SETTINGS_INVALID', `--log-level: '${level}' is not a pino level`, {
      flag: 'log-level',
    });
  }
  return level;
}
