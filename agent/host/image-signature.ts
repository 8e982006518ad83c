/**
 * Verifies an image's GPG "simple signing" signature (containers-signature(5),
 * what Podman's and CRI-O's containers-policy.json `signedBy` accepts) with
 * maintained tools, not with crypto of our own: skopeo fetches the manifest
 * and checks a signature against it, GnuPG holds the keys.
 *
 *   1. the signatures: <lookaside>/<path>@<algo>=<hex>/signature-<n>, n = 1, 2, …
 *      (the lookaside layout of containers/image; <path> has no registry host)
 *   2. the manifest: `skopeo inspect --raw docker://<registry>/<path>@<digest>`,
 *      whose bytes must hash to the digest
 *   3. a temporary GNUPGHOME holding only the entry's keyring (`gpg --import`)
 *   4. `skopeo standalone-verify MANIFEST <registry>/<path> FINGERPRINT SIGNATURE`
 *      for each signature and accepted fingerprint until one passes
 *
 * Every child runs with a deadline and a minimal environment (no ambient
 * credentials: only the node's registry credentials, in a temporary authfile).
 * A failure is a verdict naming the reason and quoting the tool's stderr.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImageSignatureVerifier, SignatureCheck, SignatureVerdict } from '../executor/ports.js';

export interface CommandOptions {
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

export interface CommandResult {
  /** The exit code; null when it did not exit by itself. */
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
  /** Why it did not run to its end: not installed, past its deadline, or the caller aborted. */
  readonly failure?: 'missing' | 'timeout' | 'aborted';
}

/** Runs one command without a shell. Resolves for every outcome; never throws. */
export type CommandRunner = (
  file: string,
  args: readonly string[],
  opts: CommandOptions,
) => Promise<CommandResult>;

/** A manifest or a tool's output larger than this is refused. */
const MAX_OUTPUT = 4 * 1024 * 1024;
/** A signature file larger than this is not a signature. */
const MAX_SIGNATURE_BYTES = 256 * 1024;

/** The host's commands through child_process.execFile, killed at the deadline or on abort. */
export const execRunner: CommandRunner = (file, args, opts) =>
  new Promise((resolve) => {
    execFile(
      file,
      [...args],
      {
        env: opts.env,
        timeout: opts.timeoutMs,
        killSignal: 'SIGKILL',
        encoding: 'buffer',
        maxBuffer: MAX_OUTPUT,
        ...(opts.signal ? { signal: opts.signal } : {}),
      },
      (err, stdout, stderr) => {
        const text = stderr.toString('utf8').trim();
        if (!err) return resolve({ code: 0, stdout, stderr: text });
        const code = (err as { code?: unknown }).code;
        const failure =
          code === 'ENOENT'
            ? 'missing'
            : err.name === 'AbortError'
              ? 'aborted'
              : err.killed
                ? 'timeout'
                : undefined;
        resolve({
          code: typeof code === 'number' ? code : null,
          stdout,
          stderr: text || err.message,
          ...(failure ? { failure } : {}),
        });
      },
    );
  });

export interface SkopeoVerifierOptions {
  readonly run?: CommandRunner;
  readonly skopeo?: string;
  readonly gpg?: string;
  /** Each command's deadline. */
  readonly timeoutMs?: number;
  /** Where the temporary GNUPGHOME, manifest and authfile go. */
  readonly tmp?: string;
  /** At most this many signatures are read (signature-1 … signature-N). */
  readonly maxSignatures?: number;
}

/** A refusal found on the way; verify() turns it into a verdict. */
class Refusal extends Error {}

/**
 * A tool's stderr on one line for a reason: the message of skopeo's log line
 * (`time=… level=fatal msg="…"`) when it is one, its start kept.
 */
export function quote(stderr: string): string {
  const msg = /\bmsg="((?:[^"\\]|\\.)*)"/.exec(stderr)?.[1]?.replace(/\\(.)/g, '$1') ?? stderr;
  const one = msg.replace(/\s+/g, ' ').trim();
  return one.length > 240 ? `${one.slice(0, 240)}…` : one || '(nothing on stderr)';
}

/** gpgme's summary bit: the signer's public key is not in the keyring. */
const KEY_MISSING = 0x80;

/** What a failed `skopeo standalone-verify` says, in the operator's words. */
export function classifyVerifyError(stderr: string): string {
  if (/does not match expected fingerprint|by key .* is not accepted/i.test(stderr)) return 'wrong key';
  if (/docker reference .* does not match/i.test(stderr)) return 'signed for another repository';
  if (/docker digest .* does not match/i.test(stderr)) return 'signature is for another manifest';
  const summary = Number(/Summary:(\d+)/.exec(stderr)?.[1] ?? 0);
  if ((summary & KEY_MISSING) !== 0) return 'signed by a key not in the keyring';
  return 'bad signature';
}

/** Registries Docker talks to without TLS by default (127.0.0.0/8, localhost, ::1): skopeo must too. */
export function isLoopbackRegistry(registry: string): boolean {
  const host = registry.startsWith('[')
    ? registry.slice(1, registry.indexOf(']'))
    : (registry.split(':')[0] ?? '');
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

/** Where containers/image keeps the n-th signature of a manifest under a lookaside directory. */
export function lookasidePath(lookaside: string, path: string, digest: string, n: number): string {
  const [algo = '', hex = ''] = digest.split(':');
  return join(lookaside, `${path}@${algo}=${hex}`, `signature-${n}`);
}

export class SkopeoSignatureVerifier implements ImageSignatureVerifier {
  private readonly run: CommandRunner;
  private readonly skopeo: string;
  private readonly gpg: string;
  private readonly timeoutMs: number;
  private readonly tmp: string;
  private readonly maxSignatures: number;

  constructor(opts: SkopeoVerifierOptions = {}) {
    this.run = opts.run ?? execRunner;
    this.skopeo = opts.skopeo ?? 'skopeo';
    this.gpg = opts.gpg ?? 'gpg';
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.tmp = opts.tmp ?? tmpdir();
    this.maxSignatures = opts.maxSignatures ?? 16;
  }

  async verify(check: SignatureCheck, signal?: AbortSignal): Promise<SignatureVerdict> {
    const dir = await mkdtemp(join(this.tmp, 'spcd-imgsig-'));
    try {
      const signatures = await this.signatures(check);
      const env = await this.environment(dir, check);
      const manifest = await this.manifest(dir, check, env, signal);
      await this.importKeyring(check, env, signal);
      return await this.verifyAny(check, manifest, signatures, env, signal);
    } catch (err) {
      if (err instanceof Refusal) return { verified: false, reason: err.message };
      throw err;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** The paths of signature-1 … signature-N that exist (none: refused). */
  private async signatures(check: SignatureCheck): Promise<string[]> {
    const { lookaside } = check.requirement;
    const found: string[] = [];
    for (let n = 1; n <= this.maxSignatures; n++) {
      const file = lookasidePath(lookaside, check.path, check.digest, n);
      const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined;
        throw new Refusal(`cannot read the signature ${file}: ${err.code ?? err.message}`);
      });
      if (bytes === undefined) break;
      if (bytes.length > MAX_SIGNATURE_BYTES)
        throw new Refusal(`${file} is larger than ${MAX_SIGNATURE_BYTES} bytes: not a signature`);
      found.push(file);
    }
    if (found.length === 0)
      throw new Refusal(
        `no signature: ${lookasidePath(lookaside, check.path, check.digest, 1)} does not exist`,
      );
    return found;
  }

  /** The children's environment: a fresh GNUPGHOME and HOME, and an authfile with the node's credentials. */
  private async environment(dir: string, check: SignatureCheck): Promise<ChildEnv> {
    const gnupg = join(dir, 'gnupg');
    await mkdir(gnupg, { mode: 0o700 });
    const vars = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: dir,
      GNUPGHOME: gnupg,
      LC_ALL: 'C',
    };
    if (!check.auth) return { vars, authfile: undefined, dir };
    const authfile = join(dir, 'auth.json');
    const token = Buffer.from(`${check.auth.username}:${check.auth.password}`).toString('base64');
    await writeFile(authfile, JSON.stringify({ auths: { [check.registry]: { auth: token } } }), {
      mode: 0o600,
    });
    return { vars, authfile, dir };
  }

  /** Fetches the manifest by digest and checks that its bytes are that digest; returns its file. */
  private async manifest(
    dir: string,
    check: SignatureCheck,
    env: ChildEnv,
    signal?: AbortSignal,
  ): Promise<string> {
    const args = [
      'inspect',
      '--raw',
      ...(isLoopbackRegistry(check.registry) ? ['--tls-verify=false'] : []),
      ...(env.authfile ? ['--authfile', env.authfile] : []),
      `docker://${check.registry}/${check.path}@${check.digest}`,
    ];
    const r = await this.command(this.skopeo, args, env, signal);
    if (r.code !== 0) throw new Refusal(`cannot fetch the manifest (skopeo inspect: ${quote(r.stderr)})`);
    const [algo = '', hex = ''] = check.digest.split(':');
    const actual = createHash(algo).update(r.stdout).digest('hex');
    if (actual !== hex)
      throw new Refusal(
        `manifest digest mismatch: the registry's manifest is ${algo}:${actual}, not ${check.digest}`,
      );
    const file = join(dir, 'manifest.json');
    await writeFile(file, r.stdout, { mode: 0o600 });
    return file;
  }

  private async importKeyring(check: SignatureCheck, env: ChildEnv, signal?: AbortSignal): Promise<void> {
    const { keyring } = check.requirement;
    const args = ['--batch', '--no-tty', '--no-autostart', '--quiet', '--import', keyring];
    const r = await this.command(this.gpg, args, env, signal);
    if (r.code !== 0) throw new Refusal(`cannot import the keyring ${keyring} (gpg: ${quote(r.stderr)})`);
  }

  /** The first signature that verifies with an accepted key, or a refusal naming each one's failure. */
  private async verifyAny(
    check: SignatureCheck,
    manifest: string,
    signatures: readonly string[],
    env: ChildEnv,
    signal?: AbortSignal,
  ): Promise<SignatureVerdict> {
    const identity = `${check.registry}/${check.path}`;
    const failures: string[] = [];
    for (const sig of signatures) {
      let failure = '';
      for (const fpr of check.requirement.fingerprints) {
        const args = ['standalone-verify', manifest, identity, fpr, sig];
        const r = await this.command(this.skopeo, args, env, signal);
        if (r.code === 0) return { verified: true, fingerprint: fpr };
        failure = `${classifyVerifyError(r.stderr)} (skopeo standalone-verify: ${quote(r.stderr)})`;
      }
      failures.push(`${sig}: ${failure}`);
    }
    return {
      verified: false,
      reason: `no signature verifies with a key of ${check.requirement.fingerprints.join(', ')}: ${failures.join('; ')}`,
    };
  }

  /** Runs one command; a missing tool, a deadline or an abort ends the verification. */
  private async command(
    file: string,
    args: readonly string[],
    env: ChildEnv,
    signal?: AbortSignal,
  ): Promise<CommandResult> {
    const r = await this.run(file, args, {
      env: env.vars,
      timeoutMs: this.timeoutMs,
      ...(signal ? { signal } : {}),
    });
    if (r.failure === 'aborted' || signal?.aborted) throw signal?.reason ?? new Error(`${file} aborted`);
    if (r.failure === 'missing')
      throw new Refusal(
        `${file} is not installed: signature verification needs skopeo and gnupg (scripts/ensure-skopeo.sh)`,
      );
    if (r.failure === 'timeout')
      throw new Refusal(`${file} ${args[0] ?? ''} did not finish within ${this.timeoutMs} ms`);
    return r;
  }
}

interface ChildEnv {
  readonly vars: Readonly<Record<string, string>>;
  readonly authfile: string | undefined;
  readonly dir: string;
}
