import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../..');
const run = (root: string) =>
  spawnSync('bash', [join(REPO, 'scripts/install-unit.sh'), '--root', root], { encoding: 'utf8' });

function tree(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? [`${join(dir, e.name).slice(base.length)}/`, ...tree(join(dir, e.name), base)]
      : [join(dir, e.name).slice(base.length)],
  );
}

describe('scripts/install-unit.sh --root', () => {
  it('installs the unit, config skeleton, state dir and group, and a second run changes nothing', () => {
    const root = mkdtempSync(join(tmpdir(), 'spcd-install-'));
    mkdirSync(join(root, 'etc'));
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\nsystemd-journal:x:999:\n');
    const first = run(root);
    expect(first.status, first.stderr).toBe(0);
    expect(readFileSync(join(root, 'etc/systemd/system/spcd.service'), 'utf8')).toBe(
      readFileSync(join(REPO, 'systemd/spcd.service'), 'utf8'),
    );
    expect(readFileSync(join(root, 'etc/group'), 'utf8')).toMatch(/^spcd:x:998:$/m);
    expect(statSync(join(root, 'var/lib/spcd')).mode & 0o777).toBe(0o750);
    expect(statSync(join(root, 'etc/spcd')).mode & 0o777).toBe(0o750);
    expect(readFileSync(join(root, 'etc/spcd/overrides.yaml'), 'utf8')).toMatch(/Per-host overrides/);
    const shipped = tree(join(REPO, 'container-sets')).filter((f) => f.endsWith('.yaml'));
    const installed = tree(join(root, 'etc/spcd/container-sets')).filter((f) => f.endsWith('.yaml'));
    expect(installed.sort()).toEqual(shipped.sort());
    // the schemas the sets name on their first line are installed next to them
    const schemas = tree(join(REPO, 'container-sets')).filter((x) => x.endsWith('.schema.json'));
    expect(schemas).toHaveLength(2);
    for (const f of schemas)
      expect(readFileSync(join(root, 'etc/spcd/container-sets', f), 'utf8'), f).toBe(
        readFileSync(join(REPO, 'container-sets', f), 'utf8'),
      );

    // the operator edits overrides.yaml; a second run keeps it and reports no change
    writeFileSync(join(root, 'etc/spcd/overrides.yaml'), 'globals: {my_ip: 192.0.2.10}\n');
    const before = tree(root);
    const second = run(root);
    expect(second.status, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/unit up to date/);
    expect(second.stdout).toMatch(/group spcd exists/);
    expect(second.stdout).not.toMatch(/added|installed|wrote/);
    expect(tree(root)).toEqual(before);
    expect(readFileSync(join(root, 'etc/spcd/overrides.yaml'), 'utf8')).toBe(
      'globals: {my_ip: 192.0.2.10}\n',
    );
    expect(readFileSync(join(root, 'etc/group'), 'utf8').match(/^spcd:/gm)).toHaveLength(1);
  });

  it('refuses unknown arguments', () => {
    const r = spawnSync('bash', [join(REPO, 'scripts/install-unit.sh'), '--bogus'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown argument --bogus/);
  });
});
