/**
 * `spcctl fleet status --etcd-endpoints …`: the fleet of hosts without
 * Kubernetes, read from the etcd cluster the daemons coordinate through. The
 * flags are spcd's own (agent/etcd/settings.ts: same names, same checks), and
 * so are the trust rules: plaintext only with --etcd-insecure (warned on
 * stderr), https:// checked against --etcd-ca with a client certificate or an
 * etcd user, the TLS and password files checked as trusted paths before they
 * are read (agent/etcd/client.ts). The etcd room is loaded with a dynamic
 * import() only for this command.
 */
import type { EtcdSettings } from '../etcd/settings.js';
import type { FleetStatus } from '../rollout/fleet-view.js';
import type { Parsed } from './args.js';
import { CliError, EXIT } from './exit.js';

/** spcd's etcd flags, as spcctl takes them (test/unit/cli-fleet-etcd.test.ts keeps them equal to ETCD_FLAGS). */
export const ETCD_OPTIONS = [
  'etcd-endpoints',
  'etcd-prefix',
  'etcd-ca',
  'etcd-cert',
  'etcd-key',
  'etcd-user',
  'etcd-password-file',
  'etcd-insecure',
] as const;
/** The Kubernetes path's flags: they name another source. */
const KUBE_OPTIONS = ['kubeconfig', 'namespace', 'configmap'] as const;

const given = (v: Parsed['values'], k: string): string | undefined =>
  typeof v[k] === 'string' ? v[k] : v[k] === true ? 'true' : undefined;

/** Whether any --etcd-* flag is given: then the fleet is read from etcd, never through Kubernetes. */
export function wantsEtcd(v: Parsed['values']): boolean {
  return ETCD_OPTIONS.some((k) => given(v, k) !== undefined);
}

/** The etcd settings from the flags, by spcd's own parser; a bad value exits 2 naming its flag. */
async function settingsOf(v: Parsed['values']): Promise<EtcdSettings> {
  const { parseEtcdSettings } = await import('../etcd/settings.js');
  const endpoints = given(v, 'etcd-endpoints');
  if (endpoints === undefined) {
    const other = ETCD_OPTIONS.find((k) => given(v, k) !== undefined) ?? 'etcd-prefix';
    throw new CliError(`--${other} is set but --etcd-endpoints is not`, EXIT.USAGE);
  }
  if (endpoints.trim() === '') throw new CliError('--etcd-endpoints: names no endpoint', EXIT.USAGE);
  const kube = KUBE_OPTIONS.find((k) => v[k] !== undefined);
  if (kube)
    throw new CliError(
      `--${kube} cannot be used with --etcd-endpoints: the fleet is read from Kubernetes or from etcd`,
      EXIT.USAGE,
    );
  let s: EtcdSettings | undefined;
  try {
    // N is the daemons' own (--fleet-slots): the view shows the rollout object's, or "node default".
    s = parseEtcdSettings((k) => given(v, k), 1);
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
 * Reads the fleet from etcd with spcd's trust rules (settings.ts, client.ts);
 * `warn` takes the --etcd-insecure warning. An unreachable cluster exits 3
 * naming the endpoints.
 */
export async function readEtcdFleet(
  v: Parsed['values'],
  now: number,
  warn: (line: string) => void,
): Promise<FleetStatus> {
  const s = await trustedFiles(await settingsOf(v));
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
