import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { assertTrusted } from '../../agent/spec/trusted-paths.js';

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A templates-like tree in a fresh 0700 folder under the (sticky) temp dir. */
function tree(): string {
  const root = mkdtempSync(join(tmpdir(), 'spcd-trust-'));
  made.push(root);
  const dir = join(root, 'templates');
  mkdirSync(join(dir, 'nova'), { recursive: true, mode: 0o755 });
  writeFileSync(join(dir, 'nova', 'nova.conf.j2'), '[DEFAULT]\n', { mode: 0o644 });
  return dir;
}

async function refusal(dir: string, opts: Parameters<typeof assertTrusted>[3] = {}): Promise<string> {
  try {
    await assertTrusted(dir, 'templates directory', 'tree', opts);
  } catch (err) {
    if (isSpcdError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'accepted';
}

describe('trusted template and check directories', () => {
  const asRoot = process.getuid?.() === 0;

  it('accepts a root-owned tree under a sticky temp folder', async () => {
    expect(await refusal(tree())).toBe('accepted');
  });

  it('refuses a file writable by others, naming it', async () => {
    const dir = tree();
    chmodSync(join(dir, 'nova', 'nova.conf.j2'), 0o666);
    expect(await refusal(dir)).toBe(
      `UNTRUSTED_PATH: templates directory ${dir}: ${join(dir, 'nova', 'nova.conf.j2')} is writable by its group or by others (mode 0666); spcd will not use it`,
    );
  });

  it('refuses a group-writable folder inside or above, and a world-writable one above that is not sticky', async () => {
    const dir = tree();
    chmodSync(join(dir, 'nova'), 0o775);
    expect(await refusal(dir)).toContain(
      `${join(dir, 'nova')} is writable by its group or by others (mode 0775)`,
    );
    chmodSync(join(dir, 'nova'), 0o755);
    const parent = join(dir, '..');
    chmodSync(parent, 0o775);
    expect(await refusal(dir)).toContain(
      'is a folder above it writable by its group or by others (mode 0775)',
    );
    chmodSync(parent, 0o777);
    expect(await refusal(dir)).toContain(
      'is a folder above it writable by its group or by others (mode 0777)',
    );
    chmodSync(parent, 0o1777); // sticky, as /tmp: others cannot rename what is in it
    expect(await refusal(dir)).toBe('accepted');
    chmodSync(dir, 0o1777); // the input itself: never
    expect(await refusal(dir)).toContain(`${dir} is writable by its group or by others (mode 01777)`);
  });

  it('checks the target of a symlinked directory, and the folders above the link', async () => {
    const dir = tree();
    const elsewhere = mkdtempSync(join(tmpdir(), 'spcd-trust-'));
    made.push(elsewhere);
    const link = join(elsewhere, 'link');
    symlinkSync(dir, link);
    expect(await refusal(link)).toBe('accepted');
    chmodSync(join(dir, 'nova'), 0o777);
    expect(await refusal(link)).toContain(`${join(dir, 'nova')} is writable by its group or by others`);
    chmodSync(join(dir, 'nova'), 0o755);
    chmodSync(elsewhere, 0o777); // whoever may write here may point the link elsewhere
    expect(await refusal(link)).toContain(`${elsewhere} is a folder above it writable`);
  });

  it('secrets: owner root and mode 0600 or stricter; a missing optional file is undefined', async () => {
    const dir = tree();
    const file = join(dir, 'secrets.yaml');
    writeFileSync(file, 'a: b\n', { mode: 0o600 });
    expect(await assertTrusted(file, 'secrets file', 'secret')).toBe(file);
    chmodSync(file, 0o640);
    await expect(assertTrusted(file, 'secrets file', 'secret')).rejects.toMatchObject({
      code: 'SECRETS_INSECURE',
      message: `secrets file ${file} has mode 0640: it must be readable and writable by its owner only (chmod 0600); spcd will not use it`,
    });
    expect(await assertTrusted(join(dir, 'none.yaml'), 'secrets file', 'secret', { optional: true })).toBe(
      undefined,
    );
  });

  it.runIf(asRoot)('refuses an entry owned by another user', async () => {
    const dir = tree();
    chownSync(join(dir, 'nova', 'nova.conf.j2'), 65534, 65534);
    expect(await refusal(dir, { owners: [] })).toContain('is owned by uid 65534, not root');
  });

  it('does not follow symlinks inside (the loaders contain them) and bounds the walk', async () => {
    const dir = tree();
    symlinkSync('/etc/passwd', join(dir, 'link.j2'));
    expect(await refusal(dir)).toBe('accepted');
    expect(await refusal(dir, { maxEntries: 2 })).toContain('holds more than 2 entries');
  });
});
