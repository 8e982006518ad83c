import { describe, expect, it } from 'vitest';
import { diffConfigs } from '../../agent/render/diff.js';
import { diffLines, formatHunks, splitLines } from '../../agent/render/line-diff.js';

const m = (entries: Record<string, string>): Map<string, string> => new Map(Object.entries(entries));

describe('diffConfigs', () => {
  it('shows a unified diff of a changed file and skips unchanged ones', () => {
    const old = m({ 'a.conf': 'one\ntwo\nthree\n', 'same.conf': 'x\n' });
    const now = m({ 'a.conf': 'one\nTWO\nthree\n', 'same.conf': 'x\n' });
    expect(diffConfigs(old, now, new Set())).toEqual([
      {
        path: 'a.conf',
        change: 'modified',
        diff: '--- a/a.conf\n+++ b/a.conf\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n',
      },
    ]);
  });

  it('masks every secret value on both sides', () => {
    const old = m({ 'nova.conf': '[placement]\npassword = hunter2\nhost = a\n' });
    const now = m({
      'nova.conf': '[placement]\npassword = hunter2\nhost = b\nurl = rabbit://u:hunter2@h//\n',
    });
    const [d] = diffConfigs(old, now, new Set(['hunter2']));
    expect(d?.diff).not.toContain('hunter2');
    expect(d?.diff).toContain(' password = ******');
    expect(d?.diff).toContain('+url = rabbit://u:******@h//');
  });

  it('masks a rotated secret: the old value is hidden by the key that carries a secret now', () => {
    const old = m({ 'nova.conf': '[neutron]\npassword = old-secret\nregion = r1\n' });
    const now = m({ 'nova.conf': '[neutron]\npassword = new-secret\nregion = r1\n' });
    const [d] = diffConfigs(old, now, new Set(['new-secret']));
    expect(d?.diff).not.toContain('old-secret');
    expect(d?.diff).not.toContain('new-secret');
    expect(d?.diff).toContain('-password = ******');
    expect(d?.diff).toContain('+password = ******');
  });

  it('masks every line of a multi-line secret, and the body of a private key no longer in the secrets', () => {
    const key = (b: string): string =>
      `-----BEGIN RSA PRIVATE KEY-----\n${b}1\n${b}2\n-----END RSA PRIVATE KEY-----\n`;
    const secrets = new Set(['line-one-of-new', 'line-two-of-new']);
    const old = m({ 'tls.pem': key('OLDKEYBODY'), 'x.txt': 'a\n' });
    const now = m({ 'tls.pem': key('NEWKEYBODY'), 'x.txt': '  line-one-of-new\n  line-two-of-new\n' });
    const [pem, x] = diffConfigs(old, now, secrets);
    expect(pem?.diff).not.toMatch(/OLDKEYBODY|NEWKEYBODY/);
    expect(pem?.diff).toContain('-******\n-******\n+******\n+******\n');
    expect(x?.diff).toContain('+  ******\n+  ******\n');
  });

  it('lists added files in full (masked) and removed files without content', () => {
    const old = m({ 'gone.conf': 'password = old-secret\n' });
    const now = m({ 'new.conf': 'k = v\npw = s3cret\n' });
    const diffs = diffConfigs(old, now, new Set(['s3cret']));
    expect(diffs.map((d) => [d.path, d.change])).toEqual([
      ['gone.conf', 'removed'],
      ['new.conf', 'added'],
    ]);
    expect(diffs[0]?.diff).not.toContain('old-secret');
    expect(diffs[1]?.diff).toBe('--- /dev/null\n+++ b/new.conf\n@@ -0,0 +1,2 @@\n+k = v\n+pw = ******\n');
  });

  it('treats no old config as every file added', () => {
    const diffs = diffConfigs(undefined, m({ 'config.json': '{}\n' }), new Set());
    expect(diffs).toEqual([
      {
        path: 'config.json',
        change: 'added',
        diff: '--- /dev/null\n+++ b/config.json\n@@ -0,0 +1,1 @@\n+{}\n',
      },
    ]);
  });
});

describe('line diff', () => {
  it('finds a minimal edit and groups far-apart changes into separate hunks', () => {
    const a = Array.from({ length: 30 }, (_, i) => `line ${i}`);
    const b = [...a];
    b[2] = 'changed 2';
    b.splice(25, 1);
    const ops = diffLines(a, b);
    expect(ops.filter((o) => o.kind !== ' ')).toEqual([
      { kind: '-', text: 'line 2' },
      { kind: '+', text: 'changed 2' },
      { kind: '-', text: 'line 25' },
    ]);
    const hunks = formatHunks(ops).filter((l) => l.startsWith('@@'));
    expect(hunks).toEqual(['@@ -1,6 +1,6 @@', '@@ -23,7 +23,6 @@']);
  });

  it('splits lines without a phantom last line', () => {
    expect(splitLines('a\nb\n')).toEqual(['a', 'b']);
    expect(splitLines('a\nb')).toEqual(['a', 'b']);
    expect(splitLines('')).toEqual([]);
  });
});
