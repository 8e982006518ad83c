/**
 * Flags that have an environment variable each: the rows of spcd's table
 * (agent/daemon/settings.ts) that spcctl takes too, and one lookup rule, so
 * that spcd and spcctl read a flag and its variable the same way.
 */

/** A command line's values as node:util parseArgs gives them. */
export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

/** A flag's row in a table: its variable, and whether it takes no value. */
export interface EnvFlag {
  readonly env: string;
  /** A flag without a value (`--etcd-insecure`); its variable is true/false. */
  readonly boolean?: boolean;
}

/**
 * One flag's value: from the command line (a bare boolean flag is 'true'),
 * else its environment variable; undefined when neither. A flag wins over its
 * variable. Defaults are the caller's.
 */
export function flagOrEnv(
  values: FlagValues,
  env: NodeJS.ProcessEnv,
  table: Readonly<Record<string, EnvFlag>>,
): (flag: string) => string | undefined {
  return (flag) => {
    const v = values[flag];
    if (typeof v === 'string') return v;
    if (v === true) return 'true';
    const row = table[flag];
    return row ? env[row.env] : undefined;
  };
}

/** A boolean flag's value: true (true, 1, yes, the bare flag), false (false, 0, no, empty or unset), or undefined when it is neither. */
export function boolFlagValue(v: string | undefined): boolean | undefined {
  if (v === undefined || v === '' || /^(false|0|no)$/i.test(v)) return false;
  if (/^(true|1|yes)$/i.test(v)) return true;
  return undefined;
}

/** spcd's etcd flags (parsed by agent/etcd/settings.ts); `spcctl fleet status` takes the same. */
export const ETCD_FLAGS = {
  'etcd-endpoints': {
    env: 'SPCD_ETCD_ENDPOINTS',
    help: 'comma-separated etcd members (http(s)://host:port) for fleet rollouts without Kubernetes (optional)',
  },
  'etcd-prefix': { env: 'SPCD_ETCD_PREFIX', help: 'key prefix of the fleet in etcd', def: '/spcd/' },
  'etcd-ca': { env: 'SPCD_ETCD_CA', help: 'CA certificate (PEM) that signed the etcd members (TLS)' },
  'etcd-cert': { env: 'SPCD_ETCD_CERT', help: "this node's etcd client certificate (PEM)" },
  'etcd-key': { env: 'SPCD_ETCD_KEY', help: "this node's etcd client key (PEM)" },
  'etcd-user': { env: 'SPCD_ETCD_USER', help: "this node's etcd user (etcd authentication)" },
  'etcd-password-file': {
    env: 'SPCD_ETCD_PASSWORD_FILE',
    help: "file holding the etcd user's password (mode 0600)",
  },
  'etcd-insecure': {
    env: 'SPCD_ETCD_INSECURE',
    help: 'allow http:// endpoints: plaintext, anyone on the path reads and writes the fleet (tests on loopback only)',
    boolean: true,
  },
} as const;

/** The Kubernetes trust flag spcd (--kubeconfig, in-cluster) and `spcctl fleet status` both take. */
export const KUBE_FLAGS = {
  'kube-insecure': {
    env: 'SPCD_KUBE_INSECURE',
    help: 'allow a kubeconfig cluster with an http:// server or insecure-skip-tls-verify: anyone on the path reads the token and answers as the API server (tests on loopback only)',
    boolean: true,
  },
} as const;
