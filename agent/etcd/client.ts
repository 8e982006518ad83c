/**
 * The etcd client spcd uses (the npm `etcd3` package over gRPC): every unary
 * call has a deadline, a failed call is retried on another member, and a lost
 * watch stream reconnects within seconds (resuming from the last revision it
 * saw). Only agent/etcd/ imports etcd3.
 */
import { readFileSync } from 'node:fs';
import {
  Etcd3,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  type IOptions,
} from 'etcd3';
import { SpcdError } from '../errors.js';
import { assertTrusted, type TrustOptions } from '../spec/trusted-paths.js';

export interface EtcdConnection {
  /** http(s)://host:port of each member. */
  readonly endpoints: readonly string[];
  /** PEM files for TLS: the CA that signed the members' certificates, this node's client certificate and key. */
  readonly caFile?: string | undefined;
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
  /** etcd's own authentication: the user, and the file holding its password (first line). */
  readonly user?: string | undefined;
  readonly passwordFile?: string | undefined;
  /** Deadline of each unary call. Default 5 s. */
  readonly callTimeoutMs?: number;
  /** Longest pause between watch reconnects. Default 5 s. */
  readonly watchBackoffMaxMs?: number;
}

/** The password: the file's first line (a trailing newline is not part of it). */
function readPassword(file: string): string {
  const text = readPem(file, 'etcd-password-file').toString('utf8');
  const password = text.split(/\r?\n/)[0] ?? '';
  if (password === '')
    throw new SpcdError('SETTINGS_INVALID', `--etcd-password-file: ${file} is empty`, {
      flag: 'etcd-password-file',
      file,
    });
  return password;
}

function readPem(file: string, flag: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--${flag}: cannot read ${file}: ${(err as Error).message}`,
      { flag, file },
      { cause: err },
    );
  }
}

/**
 * The daemon's check of the TLS files before it connects (docs/explanation/security.md,
 * "Trusted paths"): the key and the password file are secrets (owner root or spcd, mode 0600 or
 * stricter), the CA and certificate decide whom spcd trusts (writable by
 * root only); each in folders only root can write. The resolved paths are
 * returned: read those. `spcctl fleet status` checks them the same way
 * (`reader: 'spcctl'`); there the owner may be root or the user running it.
 */
export async function trustedEtcdFiles(
  c: EtcdConnection,
  opts: Pick<TrustOptions, 'reader'> = {},
): Promise<EtcdConnection> {
  const check = async (file: string | undefined, what: string, kind: 'file' | 'secret') =>
    file === undefined ? undefined : assertTrusted(file, what, kind, opts);
  return {
    ...c,
    caFile: await check(c.caFile, '--etcd-ca file', 'file'),
    certFile: await check(c.certFile, '--etcd-cert file', 'file'),
    keyFile: await check(c.keyFile, '--etcd-key file', 'secret'),
    passwordFile: await check(c.passwordFile, '--etcd-password-file', 'secret'),
  };
}

/** The watch reconnect delay: from `first` ms, doubled per failure, at most `max` (etcd3's backoff shape). */
interface Backoff {
  readonly duration: number;
  next(context: unknown): Backoff;
}
function doubling(first: number, max: number): Backoff {
  return { duration: first, next: () => doubling(Math.min(max, first * 2), max) };
}

export function etcdOptions(c: EtcdConnection): IOptions {
  const callTimeoutMs = c.callTimeoutMs ?? 5_000;
  const tls = c.caFile !== undefined || c.certFile !== undefined;
  return {
    hosts: [...c.endpoints],
    dialTimeout: callTimeoutMs,
    defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
    faultHandling: {
      watchBackoff: doubling(100, c.watchBackoffMaxMs ?? 5_000),
    },
    ...(c.user !== undefined && c.passwordFile !== undefined
      ? { auth: { username: c.user, password: readPassword(c.passwordFile) } }
      : {}),
    ...(tls
      ? {
          credentials: {
            rootCertificate: readPem(c.caFile ?? '', 'etcd-ca'),
            ...(c.certFile ? { certChain: readPem(c.certFile, 'etcd-cert') } : {}),
            ...(c.keyFile ? { privateKey: readPem(c.keyFile, 'etcd-key') } : {}),
          },
        }
      : {}),
  };
}

export function connectEtcd(c: EtcdConnection): Etcd3 {
  return new Etcd3(etcdOptions(c));
}

/**
 * An etcd3 / gRPC error's text for display. grpc-js ends a failed connection's
 * text with its resolver's note, most often empty ("... Last error: Error:
 * connect ECONNREFUSED 127.0.0.1:2379. Resolution note: "): the empty note
 * and the nested "Error: " are cut; a note with text stays. Display only: no
 * decision is taken on this text (the error's class and code are kept as the
 * SpcdError's cause).
 */
export function etcdErrorText(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text
    .replace(/\.?\s*Resolution note:\s*$/, '')
    .replace(/Last error: Error: /g, 'Last error: ')
    .trim();
}

/**
 * An etcd3 / gRPC failure as spcd's error (a bug in spcd stays itself): etcd
 * refusing this node's user or role is ETCD_PERMISSION_DENIED, anything else
 * ETCD_UNAVAILABLE.
 */
export function unavailable(err: unknown, what: string): SpcdError {
  if (err instanceof SpcdError) return err;
  if (
    err instanceof EtcdPermissionDeniedError ||
    err instanceof EtcdAuthenticationFailedError ||
    err instanceof EtcdInvalidAuthTokenError
  )
    return new SpcdError(
      'ETCD_PERMISSION_DENIED',
      `etcd: ${what}: ${etcdErrorText(err)}`,
      { during: what },
      { cause: err },
    );
  return new SpcdError(
    'ETCD_UNAVAILABLE',
    `etcd: ${what}: ${etcdErrorText(err)}`,
    { during: what },
    { cause: err },
  );
}
