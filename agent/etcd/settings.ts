/**
 * The daemon flags of the etcd mode (fleet rollouts through an etcd cluster,
 * for hosts without Kubernetes), checked here so that a bad value names its
 * flag; the table of names and variables is agent/model/flags.ts, which
 * spcctl takes too. Pure: files are read when the client connects (client.ts).
 */
import { resolve } from 'node:path';
import { SpcdError } from '../errors.js';
import { boolFlagValue, ETCD_FLAGS } from '../model/flags.js';

export interface EtcdSettings {
  readonly endpoints: readonly string[];
  /** Starts and ends with '/'. */
  readonly prefix: string;
  readonly caFile: string | undefined;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  /** etcd's own authentication: this node's etcd user, and the file holding its password. */
  readonly user: string | undefined;
  readonly passwordFile: string | undefined;
  /** --etcd-insecure: http:// endpoints were allowed explicitly (the daemon warns at start-up). */
  readonly insecure: boolean;
  /** N when the rollout object names none (--fleet-slots). */
  readonly fleetSlots: number;
}

export { ETCD_FLAGS };

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
  const others = (['etcd-user', 'etcd-password-file', 'etcd-insecure'] as const).filter((f) => get(f));
  if (list === undefined || list.trim() === '') {
    const set = [...tlsFlags, ...others][0];
    if (set) throw bad(set, 'is set but --etcd-endpoints is not');
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
  const auth = parseAuth(get, file);
  const insecure = boolFlagValue(get('etcd-insecure'));
  if (insecure === undefined)
    throw bad('etcd-insecure', `'${get('etcd-insecure')}' is not true or false`, get('etcd-insecure'));
  if (https.length > 0 && insecure)
    throw bad(
      'etcd-insecure',
      'is for http:// endpoints only; https:// endpoints are checked against --etcd-ca',
    );
  if (https.length === 0 && !insecure)
    throw bad(
      'etcd-endpoints',
      `'${endpoints[0]}' is plaintext: anyone on the path could read and write the fleet's keys. ` +
        'Use https:// with --etcd-ca and a client certificate (--etcd-cert, --etcd-key) or an etcd user ' +
        '(--etcd-user, --etcd-password-file); or pass --etcd-insecure to allow plaintext (tests on loopback only)',
      list,
    );
  if (https.length > 0 && !certFile && !auth.user)
    throw bad(
      'etcd-endpoints',
      'https:// needs this node to authenticate: a client certificate (--etcd-cert, --etcd-key) or an etcd user (--etcd-user, --etcd-password-file)',
      list,
    );
  return { endpoints, prefix, caFile, certFile, keyFile, ...auth, insecure, fleetSlots };
}

function parseAuth(
  get: (flag: string) => string | undefined,
  file: (flag: string) => string | undefined,
): { user: string | undefined; passwordFile: string | undefined } {
  const user = get('etcd-user') || undefined;
  const passwordFile = file('etcd-password-file');
  if ((user === undefined) !== (passwordFile === undefined))
    throw bad(
      user ? 'etcd-password-file' : 'etcd-user',
      'is required with --etcd-user / --etcd-password-file (both or neither)',
    );
  if (user !== undefined && !/^[A-Za-z0-9._@-]{1,128}$/.test(user))
    throw bad('etcd-user', `'${user}' must be 1 to 128 of A-Z a-z 0-9 . _ @ -`, user);
  return { user, passwordFile };
}
