import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSpcdError, type SpcdError } from '../../agent/errors.js';
import { resolveImage } from '../../agent/executor/image.js';
import type { ExecutorDeps } from '../../agent/executor/ports.js';
import { SkopeoSignatureVerifier } from '../../agent/host/image-signature.js';
import { loadImagePolicyFile } from '../../agent/spec/image-policy.js';
import { REPO } from '../support/daemon.js';
import { docker } from '../support/docker.js';
import { LocalRegistry } from '../support/registry.js';
import { UpgradeHarness } from '../support/upgrade-harness.js';

/**
 * Signature verification against a real registry, real skopeo and GnuPG: a
 * throwaway key signs one pushed image's manifest with `skopeo
 * standalone-sign` into a lookaside directory, and the executor's image step
 * pulls that digest; an unsigned digest, one signed by another key and one
 * with a tampered signature are each IMAGE_REFUSED and never reach the engine.
 */
let h: UpgradeHarness;
let reg: LocalRegistry;
let deps: ExecutorDeps;
let lookaside: string;
const homes: string[] = [];
/** tag -> the manifest digest the registry serves for it. */
const digests = new Map<string, string>();
let op = 0;

function run(cmd: string, args: string[], env: Record<string, string> = {}, timeout = 120_000): Buffer {
  return execFileSync(cmd, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout,
  });
}

/** A passphrase-less signing key in its own GNUPGHOME; returns the home and the key's fingerprint. */
function makeKey(name: string): { home: string; fpr: string } {
  const home = mkdtempSync(join(tmpdir(), 'spcd-gpg-'));
  homes.push(home);
  const env = { GNUPGHOME: home };
  const uid = `${name} <${name}@spcd.invalid>`;
  const batch = ['--batch', '--pinentry-mode', 'loopback', '--passphrase', ''];
  run('gpg', [...batch, '--quick-gen-key', uid, 'default', 'default', 'never'], env);
  const listing = run('gpg', ['--batch', '--with-colons', '--list-secret-keys', uid], env).toString();
  const fpr = /^fpr:(?:[^:]*:){8}([0-9A-F]{40,64}):/m.exec(listing)?.[1];
  if (!fpr) throw new Error(`no fingerprint in gpg's listing:\n${listing}`);
  return { home, fpr };
}

/** The manifest the registry serves for a tag, its digest remembered, written to a file for signing. */
function fetchManifest(tag: string): string {
  const raw = run('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${reg.ref(tag)}`]);
  digests.set(tag, `sha256:${createHash('sha256').update(raw).digest('hex')}`);
  const file = join(h.root, `manifest-${tag}.json`);
  writeFileSync(file, raw);
  return file;
}

/** Signs a tag's manifest with a key into the lookaside (signature-1); returns the signature's path. */
function sign(tag: string, key: { home: string; fpr: string }): string {
  const manifest = fetchManifest(tag);
  const hex = digests.get(tag)!.slice('sha256:'.length);
  const dir = join(lookaside, `kolla/demo-service@sha256=${hex}`);
  mkdirSync(dir, { recursive: true });
  const out = join(dir, 'signature-1');
  const identity = `${reg.host}/kolla/demo-service`;
  run('skopeo', ['standalone-sign', manifest, identity, key.fpr, '--output', out], { GNUPGHOME: key.home });
  return out;
}

const pinned = (tag: string): string => `${reg.host}/kolla/demo-service@${digests.get(tag)!}`;

beforeAll(async () => {
  // Debian's skopeo and gnupg, installed when missing (apt-get: up to a few minutes on a cold host).
  run('bash', [join(REPO, 'scripts/ensure-skopeo.sh')], {}, 540_000);
  h = await UpgradeHarness.create('imgsig');
  reg = LocalRegistry.start(join(h.root, 'registry'));
  reg.push('1', '2', '3', 'crash');
  lookaside = join(h.root, 'sigstore');
  const trusted = makeKey('spcd-trusted');
  const stranger = makeKey('spcd-stranger');
  const keyring = join(h.root, 'pubring.gpg');
  writeFileSync(keyring, run('gpg', ['--batch', '--export', trusted.fpr], { GNUPGHOME: trusted.home }), {
    mode: 0o644,
  });
  sign('1', trusted);
  fetchManifest('2'); // never signed
  sign('3', stranger);
  const tampered = sign('crash', trusted);
  const bytes = readFileSync(tampered);
  const mid = bytes.length >> 1;
  bytes[mid] = (bytes[mid] ?? 0) ^ 0xff; // one byte flipped in the middle of the OpenPGP message
  writeFileSync(tampered, bytes);
  const policyFile = join(h.root, 'image-policy.yaml');
  writeFileSync(
    policyFile,
    [
      'allow:',
      `  - prefix: ${reg.host}/kolla`,
      '    signedBy:',
      `      keyring: ${keyring}`,
      `      fingerprints: ['${trusted.fpr}']`,
      `    lookaside: ${lookaside}`,
    ].join('\n'),
    { mode: 0o644 },
  );
  deps = {
    ...h.deps,
    imagePolicy: await loadImagePolicyFile(policyFile),
    imageSignatures: new SkopeoSignatureVerifier(),
  };
}, 600_000);

afterAll(async () => {
  await h?.close();
  reg?.stop();
  await reg?.removeLocalTags();
  if (digests.has('1'))
    await docker()
      .getImage(pinned('1'))
      .remove()
      .catch(() => undefined);
  for (const home of homes) {
    try {
      run('gpgconf', ['--kill', 'all'], { GNUPGHOME: home });
    } catch {
      // no agent was started for this home
    }
    rmSync(home, { recursive: true, force: true });
  }
});

async function refused(tag: string, reason: RegExp): Promise<SpcdError> {
  const image = pinned(tag);
  expect(await h.engine.imageInfo(image), `${image} is present before the test`).toBeUndefined();
  const opId = `op-${++op}`;
  const err = await resolveImage(deps, image, 'always', opId).catch((e: unknown) => e);
  expect(isSpcdError(err), `expected a typed error, got ${String(err)}`).toBe(true);
  const e = err as SpcdError;
  console.log(`${e.code}: ${e.message}`);
  expect(e.code).toBe('IMAGE_REFUSED');
  expect(String(e.details.reason)).toMatch(reason);
  expect(h.seen).toContainEqual(expect.objectContaining({ type: 'image-refused', operationId: opId, image }));
  expect(await h.engine.imageInfo(image)).toBeUndefined();
  return e;
}

describe('an image policy entry with signedBy', () => {
  it('pulls the digest signed by the trusted key', async () => {
    const image = pinned('1');
    const r = await resolveImage(deps, image, 'always', `op-${++op}`);
    expect(r.pulled).toBe(true);
    expect(r.digest).toBe(image);
    expect(await h.engine.imageInfo(image)).toBeDefined();
  });

  it('refuses a digest that has no signature', async () => {
    await refused('2', /^signature not verified: no signature: .*signature-1 does not exist/);
  });

  it('refuses a digest signed by a key that is not in the keyring', async () => {
    await refused(
      '3',
      /^signature not verified: no signature verifies with a key of .*signature-1: signed by a key not in the keyring/,
    );
  });

  it('refuses a tampered signature', async () => {
    await refused(
      'crash',
      /^signature not verified: no signature verifies with a key of .*signature-1: bad signature/,
    );
  });

  it('refuses a tag without a digest before anything is asked', async () => {
    const image = reg.ref('2');
    const err = await resolveImage(deps, image, 'always', `op-${++op}`).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'IMAGE_REFUSED',
      details: { reason: expect.stringMatching(/has no digest .* requires a signature/) },
    });
    expect(await h.engine.imageInfo(image)).toBeUndefined();
  });
});
