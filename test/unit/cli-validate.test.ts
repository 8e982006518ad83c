import { chmodSync, copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSpcctl } from '../support/cli-run.js';

const cli = (argv: string[]) => runSpcctl(argv, {});

describe('spcctl validate on the shipped definitions', () => {
  it.each(['container-sets', 'container-sets/demo', 'container-sets-e2e', 'container-sets-e2e/openstack'])(
    '%s is valid with the shipped check library',
    async (dir) => {
      const r = await cli(['validate', dir]);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
    },
  );

  it('the demo set with the no-privileged host override is valid', async () => {
    expect(
      (
        await cli([
          'validate',
          'container-sets/demo',
          '--overrides',
          'container-sets/hosts/no-privileged.yaml',
        ])
      ).code,
    ).toBe(0);
  });

  it("the shipped Linux bridge set with the end-to-end host's overrides and secrets renders", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spcctl-validate-'));
    const secrets = join(dir, 'secrets.yaml');
    copyFileSync('container-sets-e2e/hosts/openstack-compute-secrets.yaml', secrets);
    chmodSync(secrets, 0o600);
    const r = await cli([
      'validate',
      'container-sets/linuxbridge',
      '--overrides',
      'container-sets-e2e/hosts/openstack-compute.yaml',
      '--templates',
      'templates',
      '--secrets',
      secrets,
    ]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
  });

  it('exits non-zero with file:line errors on invalid ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spcctl-validate-'));
    writeFileSync(join(dir, 'x.yaml'), 'set: x\ncontainers:\n  ab:\n    image: img\n    pid: hots\n');
    const r = await cli(['validate', dir]);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain(`${join(dir, 'x.yaml')}:5: containers.ab.pid: must be one of host, private`);
  });
});
