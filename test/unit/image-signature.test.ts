import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveImage } from '../../agent/executor/image.js';
import type { ImageSignatureVerifier, SignatureCheck, SignatureVerdict } from '../../agent/executor/ports.js';
import { classifyVerifyError, isLoopbackRegistry, quote } from '../../agent/host/image-signature.js';
import { checkImage } from '../../agent/model/image-policy.js';
import { loadImagePolicyFile, parseImagePolicy } from '../../agent/spec/image-policy.js';
import { FakeProcess } from '../support/fake-executor.js';

const FPR = 'AB'.repeat(20);
const OTHER = 'CD'.repeat(20);
const HEX = 'ab'.repeat(32);
const DIGEST = `sha256:${HEX}`;

const signedEntry = (extra = ''): string =>
  [
    'allow:',
    '  - prefix: registry.example.com/signed',
    '    signedBy:',
    '      keyring: /etc/spcd/keys/pubring.gpg',
    `      fingerprints: ['${FPR.toLowerCase()}', '${OTHER.slice(0, 20)} ${OTHER.slice(20)}']`,
    '    lookaside: /var/lib/spcd/sigstore',
    extra,
  ].join('\n');

describe('a policy entry that requires a signature', () => {
  it('is read with its keyring, fingerprints (upper-case, no spaces) and lookaside, and implies a digest', () => {
    const p = parseImagePolicy(signedEntry(), '/p.yaml');
    expect(p.entries).toEqual([
      {
        prefix: 'registry.example.com/signed',
        requireDigest: true,
        signedBy: {
          keyring: '/etc/spcd/keys/pubring.gpg',
          fingerprints: [FPR, OTHER],
          lookaside: '/var/lib/spcd/sigstore',
        },
      },
    ]);
    expect(checkImage(p, 'registry.example.com/signed/nova:1')).toMatchObject({
      allowed: false,
      reason: expect.stringMatching(/has no digest .* requires one \(it requires a signature/),
    });
    expect(checkImage(p, `registry.example.com/signed/nova@${DIGEST}`)).toMatchObject({
      allowed: true,
      signature: { fingerprints: [FPR, OTHER] },
    });
  });

  const entry = (fields: string): string =>
    ['allow:', '  - prefix: registry.example.com/signed', ...fields.split('\n').map((l) => `    ${l}`)].join(
      '\n',
    );
  const signedBy = `signedBy: { keyring: /k.gpg, fingerprints: ['${FPR}'] }`;

  it.each([
    ['lookaside: /sig', /allow\[0\]\.lookaside is set without signedBy/],
    [signedBy, /allow\[0\]\.lookaside is missing/],
    ['signedBy: yes\nlookaside: /sig', /allow\[0\]\.signedBy must be a map/],
    [
      `signedBy: { keyring: /k.gpg, fingerprints: ['${FPR}'], key: x }\nlookaside: /sig`,
      /allow\[0\]\.signedBy: key is not a field/,
    ],
    [
      `signedBy: { keyring: k.gpg, fingerprints: ['${FPR}'] }\nlookaside: /sig`,
      /allow\[0\]\.signedBy\.keyring must be an absolute path/,
    ],
    [
      'signedBy: { keyring: /k.gpg, fingerprints: [] }\nlookaside: /sig',
      /allow\[0\]\.signedBy\.fingerprints must be a non-empty list/,
    ],
    [
      'signedBy: { keyring: /k.gpg }\nlookaside: /sig',
      /allow\[0\]\.signedBy\.fingerprints must be a non-empty list/,
    ],
    [
      `signedBy: { keyring: /k.gpg, fingerprints: ['${FPR}', 'ABCD'] }\nlookaside: /sig`,
      /allow\[0\]\.signedBy\.fingerprints\[1\] must be a full key fingerprint/,
    ],
    [`${signedBy}\nlookaside: sig`, /allow\[0\]\.lookaside must be an absolute path/],
    [
      `${signedBy}\nlookaside: /sig\nrequireDigest: false`,
      /allow\[0\]\.requireDigest cannot be false with signedBy/,
    ],
  ])('refuses %j', (fields, message) => {
    let err: unknown;
    try {
      parseImagePolicy(entry(fields), '/p.yaml');
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'SETTINGS_INVALID', details: { file: '/p.yaml', entry: 0 } });
    expect((err as Error).message).toMatch(/^--image-policy \/p\.yaml: /);
    expect((err as Error).message).toMatch(message);
  });
});

describe('the keyring of a signedBy entry', () => {
  it("is held to the policy file's rule at start (whoever writes it signs any image)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spcd-policy-'));
    try {
      const keyring = join(dir, 'pubring.gpg');
      const file = join(dir, 'image-policy.yaml');
      await writeFile(keyring, 'keys', { mode: 0o644 });
      const text = signedEntry().replace('/etc/spcd/keys/pubring.gpg', keyring);
      await writeFile(file, text, { mode: 0o644 });
      expect((await loadImagePolicyFile(file)).entries![0]!.signedBy!.keyring).toBe(keyring);
      await chmod(keyring, 0o666);
      await expect(loadImagePolicyFile(file)).rejects.toMatchObject({
        code: 'UNTRUSTED_PATH',
        message: expect.stringMatching(
          /allow\[0\]\.signedBy\.keyring .* is writable by its group or by others/,
        ),
      });
      await rm(keyring);
      await expect(loadImagePolicyFile(file)).rejects.toMatchObject({ code: 'SPEC_IO' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

class FakeVerifier implements ImageSignatureVerifier {
  readonly checks: SignatureCheck[] = [];
  constructor(private readonly verdict: SignatureVerdict) {}
  async verify(check: SignatureCheck): Promise<SignatureVerdict> {
    this.checks.push(check);
    return this.verdict;
  }
}

describe('the executor verifies a required signature before the engine is asked', () => {
  const image = `registry.example.com/signed/nova@${DIGEST}`;
  let p: FakeProcess;
  beforeEach(async () => {
    p = await FakeProcess.create();
    p.engine.addRemoteImage(image);
  });
  afterEach(async () => p.close());

  const deps = (verifier?: ImageSignatureVerifier): FakeProcess['deps'] => ({
    ...p.deps,
    imagePolicy: parseImagePolicy(signedEntry(), 'p.yaml'),
    registryAuth: async () => ({ username: 'u', password: 'pw', serveraddress: 'registry.example.com' }),
    ...(verifier ? { imageSignatures: verifier } : {}),
  });

  it('refuses without pulling when the signature does not verify, saying why', async () => {
    const v = new FakeVerifier({ verified: false, reason: 'wrong key (…)' });
    const err = await resolveImage(deps(v), image, 'always', 'op-1').catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'IMAGE_REFUSED',
      details: { image, policy: 'p.yaml', reason: 'signature not verified: wrong key (…)' },
    });
    expect(p.engine.count('pull') + p.engine.count('imageInfo')).toBe(0);
    expect(p.events).toEqual([
      expect.objectContaining({
        type: 'image-refused',
        operationId: 'op-1',
        image,
        reason: expect.stringMatching(/wrong key/),
      }),
    ]);
    expect(v.checks).toEqual([
      {
        registry: 'registry.example.com',
        path: 'signed/nova',
        digest: DIGEST,
        requirement: expect.objectContaining({ fingerprints: [FPR, OTHER] }),
        auth: expect.objectContaining({ username: 'u' }),
      },
    ]);
  });

  it('refuses when the node has no verifier', async () => {
    await expect(resolveImage(deps(), image, 'always', 'op-1')).rejects.toMatchObject({
      code: 'IMAGE_REFUSED',
      details: { reason: expect.stringMatching(/no signature verifier/) },
    });
    expect(p.engine.count('pull')).toBe(0);
  });

  it('pulls once the signature verifies', async () => {
    const v = new FakeVerifier({ verified: true, fingerprint: FPR });
    await expect(resolveImage(deps(v), image, 'always', 'op-2')).resolves.toMatchObject({ pulled: true });
    expect(p.engine.count('pull')).toBe(1);
    expect(p.events.filter((e) => e.type === 'image-refused')).toEqual([]);
  });

  it('does not ask the verifier for an entry without signedBy', async () => {
    const v = new FakeVerifier({ verified: false, reason: 'never' });
    const d = { ...deps(v), imagePolicy: parseImagePolicy('allow: [registry.example.com]', 'p.yaml') };
    await expect(resolveImage(d, image, 'always', 'op-3')).resolves.toMatchObject({ pulled: true });
    expect(v.checks).toEqual([]);
  });
});

describe('what a failed skopeo standalone-verify means', () => {
  it.each([
    ['Error verifying signature: Signature by 0123 does not match expected fingerprint ABCD', 'wrong key'],
    ['Invalid GPG signature: gpgme.Signature{Summary:4, Fingerprint:…}', 'bad signature'],
    [
      'Invalid GPG signature: gpgme.Signature{Summary:128, Status:gpgme.Error{err:0x9}}',
      'signed by a key not in the keyring',
    ],
    ['Docker reference r/a does not match r/b', 'signed for another repository'],
    ['Signature for docker digest "sha256:00" does not match', 'signature is for another manifest'],
    ['gpgme: no data', 'bad signature'],
  ])('%s: %s', (stderr, kind) => expect(classifyVerifyError(stderr)).toBe(kind));

  it("quotes the message of skopeo's log line, its start kept", () => {
    const line = `time="2026-11-27T20:20:26Z" level=fatal msg="Error verifying signature: Invalid GPG signature: gpgme.Signature{Summary:128, Fingerprint:\\"0A0B\\", ${'x'.repeat(300)}}"`;
    expect(quote(line)).toMatch(
      /^Error verifying signature: Invalid GPG signature: gpgme\.Signature\{Summary:128, Fingerprint:"0A0B", x+…$/,
    );
    expect(quote(line)).toHaveLength(241);
    expect(quote('  plain\n  text ')).toBe('plain text');
    expect(quote('')).toBe('(nothing on stderr)');
  });

  it.each([
    ['127.0.0.1:5000', true],
    ['localhost:5000', true],
    ['[::1]:5000', true],
    ['registry.example.com', false],
    ['127.example.com:5000', false],
  ])('%s is a loopback registry: %s', (r, loop) => expect(isLoopbackRegistry(r)).toBe(loop));
});
