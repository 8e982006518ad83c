/**
 * Where spcd and spcctl get the Kubernetes API's address and credentials,
 * and whether that road may be trusted. The cluster a kubeconfig's current
 * context names decides who can read the token and answer as the API server
 * (whose answers choose the images rolled out): a plain http:// server, or
 * `insecure-skip-tls-verify: true`, hands both to anyone on the path. Either
 * is refused (KUBECONFIG_INSECURE, naming the file, the context and the
 * cluster) unless --kube-insecure allows it, and then said once.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { SpcdError } from '../errors.js';
import { assertTrusted } from '../spec/trusted-paths.js';

/** The service account token a pod is given (client-node's in-cluster config reads it). */
const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

export interface LoadedKubeConfig {
  readonly kc: KubeConfig;
  /** Where it came from, for messages: `kubeconfig FILE`, `kubeconfig $KUBECONFIG (…)`, `in-cluster config`. */
  readonly source: string;
  /** The file(s) named, or undefined in a pod. */
  readonly file: string | undefined;
}

function fromFiles(files: readonly string[]): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(files[0] as string);
  for (const f of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(f);
    kc.mergeConfig(more, Boolean(kc.getCurrentContext())); // as kubectl: the first file that names a current context decides it
  }
  return kc;
}

function inCluster(): LoadedKubeConfig {
  const kc = new KubeConfig();
  kc.loadFromCluster();
  return { kc, source: 'in-cluster config (service account)', file: undefined };
}

/**
 * The kubeconfig `file`, else (`'in-cluster'`) the pod's service account, else
 * (an environment: spcctl's kubectl-like lookup) $KUBECONFIG's files, else
 * ~/.kube/config, else the pod's service account. Never client-node's last
 * resort, a plain http://localhost:8080: none found is SETTINGS_INVALID.
 */
export function loadKubeConfig(
  file: string | undefined,
  fallback: 'in-cluster' | NodeJS.ProcessEnv,
): LoadedKubeConfig {
  if (file) return { kc: fromFiles([file]), source: `kubeconfig ${file}`, file };
  if (fallback === 'in-cluster') return inCluster();
  const list = (fallback.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  if (list.length > 0)
    return { kc: fromFiles(list), source: `kubeconfig ${list.join(delimiter)}`, file: list.join(delimiter) };
  const home = join(fallback.HOME || homedir(), '.kube', 'config');
  if (existsSync(home)) return { kc: fromFiles([home]), source: `kubeconfig ${home}`, file: home };
  if (existsSync(SERVICE_ACCOUNT_TOKEN) && fallback.KUBERNETES_SERVICE_HOST) return inCluster();
  throw new SpcdError(
    'SETTINGS_INVALID',
    `no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or create ${home}`,
    { flag: 'kubeconfig' },
  );
}

/**
 * Each kubeconfig file read (none in a pod) holds the credentials and names
 * the API server whose answers choose the images: it is held to the rules of
 * a secret before anything is sent (docs/explanation/security.md, "Trusted
 * paths"): owned by root or by `reader`'s own user, mode 0600 or stricter, in
 * folders only they can write. A file anyone else could write would let them
 * point spcd at their own API server. SECRETS_INSECURE or UNTRUSTED_PATH
 * name the file.
 */
export async function assertTrustedKubeconfig(
  loaded: LoadedKubeConfig,
  reader: 'spcd' | 'spcctl',
): Promise<void> {
  if (loaded.file === undefined) return;
  for (const f of loaded.file.split(delimiter)) await assertTrusted(f, 'kubeconfig', 'secret', { reader });
}

/** What is wrong with the road to this server, or undefined when it is https:// with the certificate checked. */
function transportProblem(server: string, skipTLSVerify: boolean): string | undefined {
  if (/^http:/i.test(server))
    return `its server ${server} is plain http://: the token and every answer cross the network in clear`;
  if (skipTLSVerify)
    return "it sets insecure-skip-tls-verify: true: the API server's certificate is not checked, so anyone on the path can answer as the API server and read the token";
  return undefined;
}

/**
 * Refuses (KUBECONFIG_INSECURE) a current cluster reached in plaintext or
 * without checking its certificate, unless `insecure` (--kube-insecure); then
 * returns the warning to say once. Undefined: nothing to say.
 */
export function checkKubeTransport(
  loaded: LoadedKubeConfig,
  insecure: boolean,
  reader: 'spcd' | 'spcctl',
): string | undefined {
  const context = loaded.kc.getCurrentContext();
  const cluster = loaded.kc.getCurrentCluster();
  if (!cluster)
    throw new SpcdError(
      'SETTINGS_INVALID',
      `${loaded.source}: its current context "${context}" names no cluster`,
      { kubeconfig: loaded.file ?? null, context },
    );
  const problem = transportProblem(cluster.server, cluster.skipTLSVerify);
  if (problem === undefined) return undefined;
  const where = `${loaded.source}, context "${context}", cluster "${cluster.name}"`;
  if (insecure) return `--kube-insecure: ${where}: ${problem}`;
  throw new SpcdError(
    'KUBECONFIG_INSECURE',
    `${where}: ${problem}; ${reader} will not use it. Give the cluster an https:// server and its certificate-authority (or certificate-authority-data), or pass --kube-insecure to allow it (tests on loopback only)`,
    {
      kubeconfig: loaded.file ?? null,
      context,
      cluster: cluster.name,
      server: cluster.server,
      skipTLSVerify: cluster.skipTLSVerify,
    },
  );
}
