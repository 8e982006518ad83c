import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveImage } from '../../agent/executor/image.js';
import { checkImage, type ImagePolicy } from '../../agent/model/image-policy.js';
import { parseImageRef } from '../../agent/model/image-ref.js';
import { loadImagePolicyFile, parseImagePolicy } from '../../agent/spec/image-policy.js';
import { FakeProcess } from '../support/fake-executor.js';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

describe('image references, normalized as Docker does', () => {
  it.each([
    ['nova', 'docker.io/library/nova', 'latest', undefined],
    ['kolla/nova-compute:2024.2', 'docker.io/kolla/nova-compute', '2024.2', undefined],
    ['index.docker.io/library/nova', 'docker.io/library/nova', 'latest', undefined],
    ['127.0.0.1:5000/kolla/nova:2', '127.0.0.1:5000/kolla/nova', '2', undefined],
    ['localhost/x', 'localhost/x', 'latest', undefined],
    [`Registry.Example.com/kolla/nova@${DIGEST}`, 'registry.example.com/kolla/nova', undefined, DIGEST],
    [`r.example.com/a:1@${DIGEST}`, 'r.example.com/a', '1', DIGEST],
  ])('%s is %s', (raw, repository, tag, digest) => {
    expect(parseImageRef(raw)).toMatchObject({ repository, tag, digest });
  });

  it.each([
    '',
    'Nova',
    'a//b',
    'r.example.com/a@sha256:12',
    'a:b:c',
    'r.example.com/../x',
    `x@md5:${'a'.repeat(32)}`,
  ])('refuses %j', (raw) => {
    expect(parseImageRef(raw)).toHaveProperty('invalid');
  });
});

describe('the image policy', () => {
  const policy: ImagePolicy = parseImagePolicy(
    [
      'allow:',
      '  - registry.example.com/kolla/',
      '  - prefix: quay.io/openstack.kolla',
      '    requireDigest: true',
      '  - docker.io/library/busybox',
    ].join('\n'),
    '/etc/spcd/image-policy.yaml',
  );

  it.each([
    ['registry.example.com/kolla/nova-compute:2024.2', true],
    ['registry.example.com/kolla', true],
    ['registry.example.com/kollaevil/nova:1', false],
    ['registry.example.com.evil.io/kolla/nova:1', false],
    ['registry.example.com/other/nova:1', false],
    ['quay.io/openstack.kolla/nova-compute:2024.2', false],
    [`quay.io/openstack.kolla/nova-compute@${DIGEST}`, true],
    ['busybox', true],
    ['docker.io/busybox:1.36', true],
    ['evil/busybox', false],
    ['not a reference', false],
  ])('%s: allowed %s', (image, allowed) => {
    expect(checkImage(policy, image).allowed).toBe(allowed);
  });

  it('says which rule an image broke', () => {
    expect(checkImage(policy, 'quay.io/openstack.kolla/nova:1')).toEqual({
      allowed: false,
      reason:
        'quay.io/openstack.kolla/nova:1 has no digest and quay.io/openstack.kolla requires one (name it as …@sha256:<digest>)',
    });
    expect(checkImage(policy, 'evil.example/x:1')).toMatchObject({
      reason: expect.stringMatching(
        /^evil\.example\/x is under none of the allowed prefixes \(registry\.example\.com\/kolla, /,
      ),
    });
  });

  it('allows nothing with an empty list, and everything with no policy', () => {
    expect(checkImage(parseImagePolicy('allow: []', 'p'), 'registry.example.com/kolla/x').allowed).toBe(
      false,
    );
    expect(checkImage({ entries: undefined, source: undefined }, 'anything/at:all').allowed).toBe(true);
  });

  it.each([
    ['allow: [kolla]', /allow\[0\]: 'kolla' must start with a registry host/],
    [
      'allow: [r.example.com/kolla:1]',
      /allow\[0\]: .* is not a lower-case name component \(no tag or digest\)/,
    ],
    ['allow: [{ prefix: r.example.com, digest: true }]', /allow\[0\]: digest is not a field/],
    ['allow: r.example.com', /allow must be a list/],
    ['requireDigest: maybe\nallow: []', /requireDigest must be true or false/],
    ['allowed: []', /allowed is not a field/],
  ])('refuses the file %j', (text, message) => {
    expect(() => parseImagePolicy(text, '/p.yaml')).toThrow(message);
  });
});

describe('the executor under an image policy', () => {
  it('refuses before the engine is asked for the image, with an image-refused event', async () => {
    const p = await FakeProcess.create();
    try {
      const deps = {
        ...p.deps,
        imagePolicy: parseImagePolicy('allow: [registry.example.com/kolla]', 'p.yaml'),
      };
      const err = await resolveImage(deps, 'evil.example/x:1', 'always', 'op-1').catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: 'IMAGE_REFUSED',
        details: { image: 'evil.example/x:1', policy: 'p.yaml' },
      });
      expect(p.engine.count('pull') + p.engine.count('imageInfo')).toBe(0);
      expect(p.events).toEqual([
        expect.objectContaining({ type: 'image-refused', operationId: 'op-1', image: 'evil.example/x:1' }),
      ]);
      p.engine.addImage('registry.example.com/kolla/nova:1');
      await expect(
        resolveImage(deps, 'registry.example.com/kolla/nova:1', 'missing', 'op-2'),
      ).resolves.toMatchObject({ pulled: false });
    } finally {
      await p.close();
    }
  });
});

describe('the image policy file', () => {
  it('is refused when others may write it (whoever writes it chooses the images)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spcd-policy-'));
    try {
      const file = join(dir, 'image-policy.yaml');
      await writeFile(file, 'allow: [registry.example.com/kolla]\n', { mode: 0o644 });
      expect((await loadImagePolicyFile(file)).entries).toEqual([
        { prefix: 'registry.example.com/kolla', requireDigest: false },
      ]);
      await chmod(file, 0o666);
      await expect(loadImagePolicyFile(file)).rejects.toMatchObject({
        code: 'UNTRUSTED_PATH',
        message: expect.stringMatching(/is writable by its group or by others \(mode 0666\)/),
      });
      await expect(loadImagePolicyFile(join(dir, 'missing.yaml'))).rejects.toMatchObject({ code: 'SPEC_IO' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
