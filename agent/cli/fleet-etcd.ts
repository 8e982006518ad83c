/**
 * `spcctl fleet status --etcd-endpoints …`: the fleet of hosts without
 * Kubernetes, read from the etcd cluster the daemons coordinate through. The
 * flags and their variables are spcd's own (agent/etcd/settings.ts: same
 * names, same SPCD_ETCD_* variables, a flag winning over its variable, same
 * checks), and so are the trust rules: plaintext only with --etcd-insecure
 * (warned on stderr), https:// checked against --etcd-ca with a client
 * certificate or an etcd user, the TLS and password files checked as trusted
 * paths before they are read (agent/etcd/client.ts). The etcd room is
 * loaded with a dynamic import() only for this command.
 */
import type { EtcdSettings } from '../etcd/settings.js';
import { ETCD_FLAGS, flagOrEnv, type FlagValues } from '../model/flags.js';
import type { FleetStatus } from '../rollout/fleet-view.js';
import { CliError, EXIT } from './exit.js';

/** spcd's etcd flags, as spcctl takes them. */
const ETCD_OPTIONS = Object.keys(ETCD_FLAGS) as readonly (keyof typeof ETCD_FLAGS)[];
/** The Kubernetes path's flags: they name another source. */
const KUBE_OPTIONS = ['kubeconfig', 'namespace', 'configmap', 'kube-insecure'] as const;

const flagGiven = (v: FlagValues, k: string): boolean => v[k] !== undefined && v[k] !== false;

/**
 * Whether the fleet is read from etcd: an --etcd-* flag is given, or, when no
 * flag names Kubernetes (--kubeconfig, --namespace, --configmap,
 * --kube-insecure), one of the SPCD_ETCD_* variables is set (not empty), as
 * spcd reads them.
 */
export function wantsEtcd(v: FlagValues, env: NodeJS.ProcessEnv): boolean {
  if (ETCD_OPTIONS.some((k) => flagGiven(v, k))) return true;
  if (KUBE_OPTIONS.some((k) => flagGiven(v, k))) return false;
  return ETCD_OPTIONS.some((k) => (env[ETCD_FLAGS[k].env] ?? '') !== '');
}

/**
 * The etcd settings from the flags, else their SPCD_ETCD_* variables, by
 * spcd's own parser; a bad value exits 2 naming its flag.
 */
export async function etcdSettingsOf(v: FlagValues, env: NodeJS.ProcessEnv): Promise<EtcdSettings> {
  const { parseEtcdSettings } = await import('../etcd/settings.js');
  const get = flagOrEnv(v, env, ETCD_FLAGS);
  const endpoints = get('etcd-endpoints');
  if (endpoints === undefined) {
    const other = ETCD_OPTIONS.find((k) => (get(k) ?? '') !== '') ?? 'etcd-prefix';
    throw new CliError(`--${other} is set but --etcd-endpoints is not`, EXIT.USAGE);
  }
  if (endpoints.trim() === '') throw new CliError('--etcd-endpoints: names no endpoint', EXIT.USAGE);
  const kube = KUBE_OPTIONS.find((k) => flagGiven(v, k));
  if (kube && ETCD_OPTIONS.some((k) => flagGiven(v, k)))
    throw new CliError(
      `--${kube} cannot be used with --etcd-endpoints: the fleet is read from Kubernetes or from etcd`,
      EXIT.USAGE,
    );
  let s: EtcdSettings | undefined;
  try {
    // N is the daemons' own (--fleet-slots): the view shows the rollout object's, or "node default".
    s = parseEtcdSettings(get, 1);
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.USAGE);
  }
  if (!s) throw new CliError('--etcd-endpoints: names no endpoint', EXIT.USAGE);
  return s;
}

/** The TLS and password files, checked as spcd checks them before it connects; a refusal exits 2 naming its flag. */
async function trustedFiles(s: EtcdSettings): Promise<EtcdSettings> {
  const { trustedEtcdFiles } = await import('../etcd/client.js');
  try {
    return { ...s, ...(await trustedEtcdFiles(s, { reader: 'spcctl' })) };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'UNTRUSTED_PATH' || code === 'SECRETS_INSECURE' || code === 'SPEC_IO')
      throw new CliError(`${(err as Error).message} (${code})`, EXIT.USAGE);
    throw err;
  }
}

/**
 * Where to look when the TLS handshake failed: the flags that decide it.
 * Display only, chosen on the client's text; the exit code does not depend on it.
 */
function tlsHint(s: EtcdSettings, msg: string): string {
  if (s.caFile === undefined || !/certificate|altname|SSL|TLS/i.test(msg)) return '';
  const client = s.certFile ? `, --etcd-cert ${s.certFile} (signed by a CA the members trust)` : '';
  return `. The TLS handshake failed: check --etcd-ca ${s.caFile} (the CA that signed the members' certificates), that each endpoint's host is named in its member's certificate${client}`;
}

/** What spcd logs at start-up with --etcd-insecure, said on stderr. */
export const INSECURE_WARNING =
  "warning: --etcd-insecure: etcd is read in plaintext; anyone on the path can read the fleet's keys (and an etcd password) and change what is shown";

/**
 * Reads the fleet from etcd with spcd's trust rules (settings.ts, client.ts),
 * the flags from `v` and the variables from `env`; `warn` takes the
 * --etcd-insecure warning. An unreachable cluster exits 3 naming the endpoints.
 */
export async function readEtcdFleet(
  v: FlagValues,
  env: NodeJS.ProcessEnv,
  now: number,
  warn: (line: string) => void,
): Promise<FleetStatus> {
  const s = await trustedFiles(await etcdSettingsOf(v, env));
  if (s.insecure) warn(INSECURE_WARNING);
  const { etcdFleetStatus } = await import('../etcd/fleet-status.js');
  try {
    return await etcdFleetStatus(s, now);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const msg = (err as Error).message;
    if (code === 'ETCD_UNAVAILABLE')
      throw new CliError(
        `etcd does not answer at ${s.endpoints.join(', ')} (ETCD_UNAVAILABLE): ${msg}${tlsHint(s, msg)}`,
        EXIT.UNREACHABLE,
      );
    if (code === 'SETTINGS_INVALID') throw new CliError(msg, EXIT.USAGE); // an unreadable TLS file
    throw new CliError(msg, EXIT.FAILED);
  }
}
