/**
 * `spcctl fleet status --etcd-endpoints …`: the fleet of hosts without
 * Kubernetes, read from the etcd cluster the daemons coordinate through. The
 * flags are spcd's own (agent/etcd/settings.ts: same names, same checks); the
 * etcd room is loaded with a dynamic import() only for this command.
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

/** Reads the fleet from etcd; an unreachable cluster exits 3 naming the endpoints. */
export async function readEtcdFleet(v: Parsed['values'], now: number): Promise<FleetStatus> {
  const s = await settingsOf(v);
  const { etcdFleetStatus } = await import('../etcd/fleet-status.js');
  try {
    return await etcdFleetStatus(s, now);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const msg = (err as Error).message;
    if (code === 'ETCD_UNAVAILABLE')
      throw new CliError(
        `etcd does not answer at ${s.endpoints.join(', ')} (ETCD_UNAVAILABLE): ${msg}`,
        EXIT.UNREACHABLE,
      );
    if (code === 'SETTINGS_INVALID') throw new CliError(msg, EXIT.USAGE); // an unreadable TLS file
    throw new CliError(msg, EXIT.FAILED);
  }
}
