import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SignatureCheck } from '../../agent/executor/ports.js';
import {
  SkopeoSignatureVerifier,
  execRunner,
  type CommandOptions,
  type CommandResult,
} from '../../agent/host/image-signature.js';

const FPR = 'AB'.repeat(20);
const OTHER = 'CD'.repeat(20);
const MANIFEST = Buffer.from(
  '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}',
);
const DIGEST = `sha256:${createHash('sha256').update(MANIFEST).digest('hex')}`;

interface Call {
  readonly file: string;
  readonly args: readonly string[];
  readonly opts: CommandOptions;
  /** What the temporary files held while the command ran. */
  readonly authfile?: string;
}

/** A command runner that answers from a script and records each call (no real skopeo or gpg). */
class ScriptedRunner {
  readonly calls: Call[] = [];
  constructor(private readonly answer: (file: string, args: readonly string[]) => Partial<CommandResult>) {}

  readonly run = async (
    file: string,
    args: readonly string[],
    opts: CommandOptions,
  ): Promise<CommandResult> => {
    const i = args.indexOf('--authfile');
    const authfile = i >= 0 ? await readFile(args[i + 1]!, 'utf8') : undefined;
    this.calls.push({ file, args, opts, ...(authfile !== undefined ? { authfile } : {}) });
    return { code: 0, stdout: Buffer.alloc(0), stderr: '', ...this.answer(file, args) };
  };
}

/** Answers as healthy tools do: the manifest, an import, and a verify that passes for `good`. */
const healthy =
  (good: string = FPR, manifest: Buffer = MANIFEST) =>
  (file: string, args: readonly string[]): Partial<CommandResult> => {
    if (file === 'skopeo' && args[0] === 'inspect') return { stdout: manifest };
    if (file === 'skopeo' && args[0] === 'standalone-verify')
      return args[3] === good
        ? { stdout: Buffer.from(`Signature verified, digest ${DIGEST}\n`) }
        : {
            code: 1,
            stderr: `FATA[0000] Error verifying signature: Signature by ${good} does not match expected fingerprint ${args[3]}`,
          };
    return {};
  };

let root: string;
let tmp: string;
let lookaside: string;
let sigDir: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'spcd-sigtest-'));
  tmp = join(root, 'tmp');
  lookaside = join(root, 'sigstore');
  sigDir = join(lookaside, `kolla/nova@sha256=${DIGEST.slice(7)}`);
  await mkdir(tmp);
  await mkdir(sigDir, { recursive: true });
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const check = (over: Partial<SignatureCheck> = {}): SignatureCheck => ({
  registry: '127.0.0.1:5000',
  path: 'kolla/nova',
  digest: DIGEST,
  requirement: { keyring: '/etc/spcd/keys/pubring.gpg', fingerprints: [OTHER, FPR], lookaside },
  ...over,
});

const verifier = (r: ScriptedRunner): SkopeoSignatureVerifier =>
  new SkopeoSignatureVerifier({ run: r.run, tmp, timeoutMs: 5_000 });

describe('the skopeo signature verifier', () => {
  it('fetches the manifest, imports the keyring into a temporary GNUPGHOME and verifies with each key', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    const r = new ScriptedRunner(healthy());
    const auth = { username: 'spcd', password: 'pw', serveraddress: '127.0.0.1:5000' };
    await expect(verifier(r).verify(check({ auth }))).resolves.toEqual({ verified: true, fingerprint: FPR });
    const [inspect, gpg, first, second] = r.calls;
    expect(r.calls).toHaveLength(4);
    expect(inspect!.file).toBe('skopeo');
    expect(inspect!.args).toEqual([
      'inspect',
      '--raw',
      '--tls-verify=false',
      '--authfile',
      expect.stringMatching(/auth\.json$/),
      `docker://127.0.0.1:5000/kolla/nova@${DIGEST}`,
    ]);
    expect(JSON.parse(inspect!.authfile!)).toEqual({
      auths: { '127.0.0.1:5000': { auth: Buffer.from('spcd:pw').toString('base64') } },
    });
    expect(gpg!.file).toBe('gpg');
    expect(gpg!.args).toEqual([
      '--batch',
      '--no-tty',
      '--no-autostart',
      '--quiet',
      '--import',
      '/etc/spcd/keys/pubring.gpg',
    ]);
    const home = gpg!.opts.env.GNUPGHOME!;
    expect(home.startsWith(tmp)).toBe(true);
    for (const c of r.calls) {
      expect(c.opts.env.GNUPGHOME).toBe(home);
      expect(c.opts.timeoutMs).toBe(5_000);
      expect(Object.keys(c.opts.env).sort()).toEqual(['GNUPGHOME', 'HOME', 'LC_ALL', 'PATH']);
    }
    expect(first!.args).toEqual([
      'standalone-verify',
      expect.stringMatching(/manifest\.json$/),
      '127.0.0.1:5000/kolla/nova',
      OTHER,
      join(sigDir, 'signature-1'),
    ]);
    expect(second!.args[3]).toBe(FPR);
    expect(await readdir(tmp)).toEqual([]); // the temporary GNUPGHOME, manifest and authfile are gone
  });

  it('asks a registry that is not on loopback with TLS verified, and without an authfile when there are no credentials', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    const r = new ScriptedRunner(healthy());
    await verifier(r).verify(check({ registry: 'registry.example.com' }));
    expect(r.calls[0]!.args).toEqual([
      'inspect',
      '--raw',
      `docker://registry.example.com/kolla/nova@${DIGEST}`,
    ]);
  });

  it('refuses without running anything when the lookaside has no signature', async () => {
    const r = new ScriptedRunner(healthy());
    await expect(verifier(r).verify(check())).resolves.toEqual({
      verified: false,
      reason: `no signature: ${join(sigDir, 'signature-1')} does not exist`,
    });
    expect(r.calls).toEqual([]);
  });

  it('refuses a manifest whose bytes are not the digest', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    const r = new ScriptedRunner(healthy(FPR, Buffer.from('{"other":1}')));
    const v = await verifier(r).verify(check());
    expect(v).toMatchObject({
      verified: false,
      reason: expect.stringMatching(/^manifest digest mismatch: .* not sha256:/),
    });
    expect(r.calls.map((c) => c.args[0])).toEqual(['inspect']);
  });

  it('refuses a signature by another key, naming each signature tried and quoting skopeo', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    await writeFile(join(sigDir, 'signature-2'), 'sig');
    const stranger = 'EF'.repeat(20);
    const r = new ScriptedRunner(healthy(stranger));
    const v = await verifier(r).verify(check());
    expect(v.verified).toBe(false);
    const reason = (v as { reason: string }).reason;
    expect(reason).toMatch(new RegExp(`^no signature verifies with a key of ${OTHER}, ${FPR}: `));
    expect(reason).toContain(
      `${join(sigDir, 'signature-1')}: wrong key (skopeo standalone-verify: FATA[0000] Error verifying signature: Signature by ${stranger}`,
    );
    expect(reason).toContain(`${join(sigDir, 'signature-2')}: wrong key`);
    expect(r.calls.filter((c) => c.args[0] === 'standalone-verify')).toHaveLength(4);
  });

  it('refuses a tampered signature as a bad signature', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'tampered');
    const r = new ScriptedRunner((file, args) =>
      args[0] === 'standalone-verify'
        ? { code: 1, stderr: 'Error verifying signature: Invalid GPG signature: &{…}' }
        : healthy()(file, args),
    );
    await expect(verifier(r).verify(check())).resolves.toMatchObject({
      verified: false,
      reason: expect.stringMatching(
        /signature-1: bad signature \(skopeo standalone-verify: Error verifying signature: Invalid GPG signature/,
      ),
    });
  });

  it.each([
    [
      'skopeo',
      'inspect',
      { failure: 'missing', code: null },
      /^skopeo is not installed: .*scripts\/ensure-skopeo\.sh/,
    ],
    ['gpg', '--batch', { failure: 'missing', code: null }, /^gpg is not installed/],
    [
      'skopeo',
      'inspect',
      { failure: 'timeout', code: null },
      /^skopeo inspect did not finish within 5000 ms/,
    ],
    [
      'skopeo',
      'inspect',
      { code: 1, stderr: 'manifest unknown' },
      /^cannot fetch the manifest \(skopeo inspect: manifest unknown\)/,
    ],
    [
      'gpg',
      '--batch',
      { code: 2, stderr: 'gpg: no valid OpenPGP data found.' },
      /^cannot import the keyring .*no valid OpenPGP data/,
    ],
  ] as const)('%s %s failing (%j) is a refusal', async (tool, first, result, reason) => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    const r = new ScriptedRunner((file, args) =>
      file === tool && args[0] === first ? (result as Partial<CommandResult>) : healthy()(file, args),
    );
    await expect(verifier(r).verify(check())).resolves.toMatchObject({
      verified: false,
      reason: expect.stringMatching(reason),
    });
  });

  it('ends with the operation when it is aborted, rather than refusing', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    const ac = new AbortController();
    const r = new ScriptedRunner(() => {
      ac.abort(new Error('operation cancelled'));
      return { failure: 'aborted', code: null };
    });
    await expect(verifier(r).verify(check(), ac.signal)).rejects.toThrow('operation cancelled');
    expect(r.calls[0]!.opts.signal).toBe(ac.signal);
  });

  it('writes the authfile readable by its owner only', async () => {
    await writeFile(join(sigDir, 'signature-1'), 'sig');
    let mode = 0;
    const r = new ScriptedRunner((file, args) => healthy()(file, args));
    const run = r.run;
    const v = new SkopeoSignatureVerifier({
      tmp,
      run: async (file, args, opts) => {
        const i = args.indexOf('--authfile');
        if (i >= 0) mode = (await stat(args[i + 1]!)).mode & 0o777;
        return run(file, args, opts);
      },
    });
    await v.verify(check({ auth: { username: 'u', password: 'p', serveraddress: 'x' } }));
    expect(mode).toBe(0o600);
  });
});

describe('the host command runner', () => {
  const opts = { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, timeoutMs: 10_000 };

  it('hands back the exit code, stdout as bytes and stderr as text', async () => {
    const r = await execRunner('sh', ['-c', 'printf out; echo "it broke" >&2; exit 3'], opts);
    expect(r).toEqual({ code: 3, stdout: Buffer.from('out'), stderr: 'it broke' });
  });

  it('says when the tool is not installed', async () => {
    await expect(execRunner('/nonexistent/skopeo', ['inspect'], opts)).resolves.toMatchObject({
      failure: 'missing',
      code: null,
    });
  });

  it('says when the caller aborted it (the child is killed)', async () => {
    const ac = new AbortController();
    const running = execRunner(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
      ...opts,
      signal: ac.signal,
    });
    ac.abort();
    await expect(running).resolves.toMatchObject({ failure: 'aborted' });
  });
});
