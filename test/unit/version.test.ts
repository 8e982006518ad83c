import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../agent/main.js';
import { buildInfo, formatVersion } from '../../agent/version.js';
import { runSpcctl } from '../support/cli-run.js';

const root = join(import.meta.dirname, '..', '..');
const pkgVersion = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string })
  .version;
const tmp = mkdtempSync(join(tmpdir(), 'spcd-version-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs scripts/build-info.mjs (a copy of it under `scriptRoot` when given) into a fresh folder; returns what it wrote. */
function buildInfoFile(env: NodeJS.ProcessEnv, scriptRoot = root): Record<string, string | undefined> {
  const out = mkdtempSync(join(tmp, 'out-'));
  execFileSync(process.execPath, [join(scriptRoot, 'scripts', 'build-info.mjs'), out], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return JSON.parse(readFileSync(join(out, 'build-info.json'), 'utf8')) as Record<string, string | undefined>;
}

describe('version, commit and build date', () => {
  it('formats as NAME VERSION (commit C, built D)', () => {
    expect(
      formatVersion('spcd', { version: '1.2.3', commit: 'abcdef012345', date: '2026-01-02T03:04:05Z' }),
    ).toBe('spcd 1.2.3 (commit abcdef012345, built 2026-01-02T03:04:05Z)');
  });

  it('reads package.json; commit and date are "unknown" when run from the sources (no build-info file)', () => {
    expect(buildInfo()).toEqual({ version: pkgVersion, commit: 'unknown', date: 'unknown' });
  });

  it('the build honours SOURCE_DATE_EPOCH and names the git commit', () => {
    const info = buildInfoFile({ SOURCE_DATE_EPOCH: '86400' });
    expect(info.version).toBe(pkgVersion);
    expect(info.date).toBe('1970-01-02T00:00:00Z');
    expect(info.commit).toMatch(/^[0-9a-f]{12}(-dirty)?$/);
    expect(buildInfoFile({ SOURCE_DATE_EPOCH: '86400', SPCD_BUILD_COMMIT: 'feedface' }).commit).toBe(
      'feedface',
    );
    // without SOURCE_DATE_EPOCH: now, to the second
    expect(Date.parse(buildInfoFile({}).date ?? '')).toBeGreaterThan(Date.now() - 60_000);
  });

  it('outside a git checkout the commit is "unknown"', () => {
    const copy = join(tmp, 'no-git');
    mkdirSync(join(copy, 'scripts'), { recursive: true });
    copyFileSync(join(root, 'scripts', 'build-info.mjs'), join(copy, 'scripts', 'build-info.mjs'));
    writeFileSync(join(copy, 'package.json'), JSON.stringify({ version: '9.9.9' }));
    const info = buildInfoFile({ SOURCE_DATE_EPOCH: '0', GIT_CEILING_DIRECTORIES: tmp }, copy);
    expect(info).toEqual({ version: '9.9.9', commit: 'unknown', date: '1970-01-01T00:00:00Z' });
  });

  it('spcctl --version and spcctl version print it; -o json gives the fields', async () => {
    const want = `spcctl ${pkgVersion} (commit unknown, built unknown)\n`;
    expect(await runSpcctl(['--version'])).toEqual({ code: 0, out: want, err: '' });
    expect((await runSpcctl(['version'])).out).toBe(want);
    expect(JSON.parse((await runSpcctl(['--version', '-o', 'json'])).out)).toEqual({
      version: pkgVersion,
      commit: 'unknown',
      date: 'unknown',
    });
  });

  it('spcd --version prints it and exits 0', async () => {
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['--version'], {})).toBe(0);
      expect(write).toHaveBeenCalledWith(`spcd ${pkgVersion} (commit unknown, built unknown)\n`);
    } finally {
      write.mockRestore();
    }
  });
});
