/**
 * The daemon flags of the etcd mode (fleet rollouts through an etcd cluster,
 * for hosts without Kubernetes), checked here so that a bad value names its
 * flag. Pure: files are read when the client connects (client.ts).
 */
import { resolve } from 'node:path';
import { SpcdError } from '../errors.js';

export interface EtcdSettings {
  readonly endpoints: readonly string[];
  /** Starts and ends with '/'. */
  readonly prefix: string;
  readonly caFile: string | undefined;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  /** N when the rollout object names none (--fleet-slots). */
  readonly fleetSlots: number;
}

export const ETCD_FLAGS = {
  'etcd-endpoints': {
    env: 'SPCD_ETCD_ENDPOINTS',
    help: 'comma-separated etcd members (http(s)://host:port) for fleet rollouts without Kubernetes (optional)',
  },
  'etcd-prefix': { env: 'SPCD_ETCD_PREFIX', help: 'key prefix of the fleet in etcd', def: '/spcd/' },
  'etcd-ca': { env: 'SPCD_ETCD_CA', help: 'CA certificate (PEM) that signed the etcd members (TLS)' },
  'etcd-cert': { env: 'SPCD_ETCD_CERT', help: "this node's etcd client certificate (PEM)" },
  'etcd-key': { env: 'SPCD_ETCD_KEY', help: "this node's etcd client key (PEM)" },
} as const;

function bad(flag: string, message: string, value?: string): SpcdError {
  return new SpcdError('SETTINGS_INVALID', `--${flag}: ${message}`, {
    flag,
    ...(value !== undefined ? { value } : {}),
  });
}

/** One endpoint: http(s)://host:port, nothing else. */
function endpoint(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw bad('etcd-endpoints', `'${raw}' is not a URL like https://10.0.0.1:2379`, raw);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw bad('etcd-endpoints', `'${raw}' must start with http:// or https://`, raw);
  if (!u.port) throw bad('etcd-endpoints', `'${raw}' must name a port (etcd listens on 2379)`, raw);
  if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username)
    throw bad('etcd-endpoints', `'${raw}' must be only scheme://host:port`, raw);
  return `${u.protocol}//${u.host}`;
}

/**
 * The etcd mode's settings, or undefined when --etcd-endpoints is not set.
 * `get` is the daemon's flag-or-environment lookup.
 */
export function parseEtcdSettings(
  get: (flag: string) => string | undefined,
  fleetSlots: number,
): EtcdSettings | undefined {
  const list = get('etcd-endpoints');
  const tlsFlags = (['etcd-ca', 'etcd-cert', 'etcd-key'] as const).filter((f) => get(f));
  if (list === undefined || list.trim() === '') {
    if (tlsFlags.length > 0) throw bad(tlsFlags[0]!, 'is set but --etcd-endpoints is not');
    return undefined;
  }
  const endpoints = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(endpoint);
  if (endpoints.length === 0) throw bad('etcd-endpoints', 'names no endpoint', list);
  const file = (f: string): string | undefined => {
    const v = get(f);
    return v === undefined || v === '' ? undefined : resolve(v);
  };
  const caFile = file('etcd-ca');
  const certFile = file('etcd-cert');
  const keyFile = file('etcd-key');
  const https = endpoints.filter((e) => e.startsWith('https:'));
  if (https.length > 0 && https.length < endpoints.length)
    throw bad('etcd-endpoints', 'mixes http:// and https:// members', list);
  if (https.length > 0 && !caFile) throw bad('etcd-ca', 'is required with https:// endpoints');
  if (https.length === 0 && tlsFlags.length > 0)
    throw bad(tlsFlags[0]!, 'needs https:// endpoints in --etcd-endpoints');
  if ((certFile === undefined) !== (keyFile === undefined))
    throw bad(
      certFile ? 'etcd-key' : 'etcd-cert',
      'is required with --etcd-cert / --etcd-key (both or neither)',
    );
  const prefix = get('etcd-prefix') ?? '/spcd/';
  if (!/^\/([A-Za-z0-9._-]+\/)+$/.test(prefix))
    throw bad(
      'etcd-prefix',
      `'${prefix}' must be like /spcd/ (segments of A-Z a-z 0-9 . _ -, ending in /)`,
      prefix,
    );
  return { endpoints, prefix, caFile, certFile, keyFile, fleetSlots };
}
