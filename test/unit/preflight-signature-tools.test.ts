import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkSignatureTools, onPath } from '../../agent/preflight/signature-tools.js';
import { signedPrefixes, type ImagePolicy } from '../../agent/model/image-policy.js';

const SIGNED_BY = { keyring: '/etc/spcd/keys.gpg', fingerprints: ['A'.repeat(40)], lookaside: '/srv/sigs' };

describe('preflight: the tools signed images need', () => {
  it('has nothing to check when no entry requires a signature', async () => {
    const c = await checkSignatureTools([], async () => false);
    expect(c).toMatchObject({ name: 'image-signature-tools', ok: true });
    expect(c.detail).toBe('no image policy entry requires a signature');
  });

  it('passes with skopeo and gpg, and names what is missing otherwise, as a warning', async () => {
    expect(await checkSignatureTools(['registry.example:5000/kolla'], async () => true)).toMatchObject({
      ok: true,
      detail: 'skopeo and gpg found',
    });
    const c = await checkSignatureTools(['registry.example:5000/kolla'], async (b) => b === 'gpg');
    expect(c.ok).toBe(false);
    expect(c.severity).toBe('warn');
    expect(c.detail).toBe(
      'the image policy requires signatures under registry.example:5000/kolla but skopeo is not on PATH: ' +
        "every create of such an image will be refused; install Debian's skopeo and gnupg",
    );
    const none = await checkSignatureTools(['a.example/x', 'b.example'], async () => false);
    expect(none.detail).toMatch(/under a\.example\/x, b\.example but skopeo and gpg are not on PATH/);
  });

  it('finds an executable on PATH, and not a file that cannot run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spcd-path-'));
    try {
      writeFileSync(join(dir, 'skopeo'), '#!/bin/sh\n');
      chmodSync(join(dir, 'skopeo'), 0o755);
      writeFileSync(join(dir, 'gpg'), 'not executable');
      chmodSync(join(dir, 'gpg'), 0o644);
      expect(await onPath('skopeo', `/nonexistent:${dir}`)).toBe(true);
      expect(await onPath('gpg', dir)).toBe(false);
      expect(await onPath('skopeo', '')).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes the prefixes from the policy's entries that name signedBy", () => {
    const policy: ImagePolicy = {
      source: '/etc/spcd/image-policy.yaml',
      entries: [
        { prefix: 'registry.example:5000/kolla', requireDigest: true, signedBy: SIGNED_BY },
        { prefix: 'docker.io/library', requireDigest: false },
      ],
    };
    expect(signedPrefixes(policy)).toEqual(['registry.example:5000/kolla']);
    expect(signedPrefixes({ entries: undefined, source: undefined })).toEqual([]);
  });
});
