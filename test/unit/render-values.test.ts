import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { collectSecretValues, loadValueFile, mergeValues } from '../../agent/render/values.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spcd-render-values-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function put(name: string, text: string, mode = 0o644): Promise<string> {
  const p = join(dir, name);
  await writeFile(p, text);
  await chmod(p, mode);
  return p;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isSpcdError(err)) return err.code;
    throw err;
  }
  return 'no error';
}

describe('loadValueFile', () => {
  it('reads a YAML mapping; an empty file is {}', async () => {
    expect(await loadValueFile(await put('g.yaml', 'a: 1\nb: {c: [x, y]}\n'))).toEqual({
      a: 1,
      b: { c: ['x', 'y'] },
    });
    expect(await loadValueFile(await put('e.yaml', '# nothing\n'))).toEqual({});
  });

  it('refuses anchors and aliases, duplicate keys, non-mappings, __proto__ and oversize files', async () => {
    expect(await codeOf(loadValueFile(await put('a.yaml', 'a: &x [1]\nb: *x\n')))).toBe('SPEC_YAML');
    expect(await codeOf(loadValueFile(await put('d.yaml', 'a: 1\na: 2\n')))).toBe('SPEC_YAML');
    expect(await codeOf(loadValueFile(await put('l.yaml', '- 1\n- 2\n')))).toBe('SPEC_INVALID');
    expect(await codeOf(loadValueFile(await put('p.yaml', 'a:\n  __proto__: {x: 1}\n')))).toBe(
      'SPEC_INVALID',
    );
    const big = await put('big.yaml', `a: "${'x'.repeat(2000)}"\n`);
    expect(await codeOf(loadValueFile(big, { maxBytes: 1000 }))).toBe('SPEC_TOO_LARGE');
  });

  it('gives {} for a missing optional file and SPEC_IO for a missing required one', async () => {
    expect(await loadValueFile(join(dir, 'missing.yaml'), { optional: true })).toEqual({});
    expect(await codeOf(loadValueFile(join(dir, 'missing.yaml')))).toBe('SPEC_IO');
  });

  it('refuses a secrets file readable by group or others, naming the file and its mode', async () => {
    const p = await put('secrets.yaml', 'db_password: hunter2\n', 0o644);
    let err: unknown;
    try {
      await loadValueFile(p, { secret: true });
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'SECRETS_INSECURE')).toBe(true);
    expect((err as Error).message).toContain(p);
    expect((err as Error).message).toContain('0644');
    expect((err as Error).message).not.toContain('hunter2');
    await chmod(p, 0o640);
    expect(await codeOf(loadValueFile(p, { secret: true }))).toBe('SECRETS_INSECURE');
    await chmod(p, 0o600);
    expect(await loadValueFile(p, { secret: true })).toEqual({ db_password: 'hunter2' });
    await chmod(p, 0o400);
    expect(await loadValueFile(p, { secret: true })).toEqual({ db_password: 'hunter2' });
  });

  it('does not quote the secrets file in a YAML error', async () => {
    const p = await put('secrets.yaml', 'a: hunter2\n  b: [unclosed hunter3\n', 0o600);
    let err: unknown;
    try {
      await loadValueFile(p, { secret: true });
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'SPEC_YAML')).toBe(true);
    expect((err as Error).message).not.toMatch(/hunter/);
  });
});

describe('mergeValues', () => {
  it('applies set defaults < globals < host overrides < secrets; mappings merge, scalars and lists replace', () => {
    const { values, secretPaths } = mergeValues({
      setDefaults: {
        a: 'default',
        list: [1, 2, 3],
        nova: { virt_type: 'kvm', cpu_mode: 'host-model', x: 1 },
        d: 'd',
      },
      globals: { a: 'global', list: [9], nova: { virt_type: 'qemu' }, g: 'g' },
      hostValues: { a: 'host', nova: { cpu_mode: 'none' }, h: 'h' },
      secrets: { a: 'secret', nova: { password: 'pw' } },
    });
    expect(values).toEqual({
      a: 'secret',
      list: [9],
      nova: { virt_type: 'qemu', cpu_mode: 'none', x: 1, password: 'pw' },
      d: 'd',
      g: 'g',
      h: 'h',
    });
    expect([...secretPaths].sort()).toEqual(['a', 'nova.password']);
  });

  it('each layer wins over the one below it, one at a time', () => {
    const layers = ['setDefaults', 'globals', 'hostValues', 'secrets'] as const;
    for (let top = 0; top < layers.length; top++) {
      const sources = { setDefaults: {}, globals: {}, hostValues: {}, secrets: {} } as Record<
        (typeof layers)[number],
        Record<string, unknown>
      >;
      for (let i = 0; i <= top; i++) sources[layers[i]!] = { k: layers[i] };
      expect(mergeValues(sources).values.k).toBe(layers[top]);
    }
  });

  it('does not modify its inputs', () => {
    const setDefaults = { nova: { a: 1 } };
    const globals = { nova: { b: 2 } };
    const { values } = mergeValues({ setDefaults, globals, hostValues: {}, secrets: {} });
    (values.nova as Record<string, unknown>).c = 3;
    expect(setDefaults).toEqual({ nova: { a: 1 } });
    expect(globals).toEqual({ nova: { b: 2 } });
  });
});

describe('a values file that is not YAML', () => {
  it('is reported by file, line and reason, the quoted parts of the reason cut', async () => {
    const p = join(dir, 'secrets.yaml');
    for (const [text, reason] of [
      ['pw: !hunter2tag x\n', 'unknown tag (…)'],
      ['pw: *hunter2alias\n', 'unidentified alias (…)'],
    ]) {
      await writeFile(p, text!, { mode: 0o600 });
      const err = await loadValueFile(p, { secret: true }).catch((e: unknown) => e);
      expect((err as Error).message).toBe(`${p}:1: ${reason}`);
    }
  });
});

describe('collectSecretValues', () => {
  it('collects string and number leaves with their URL- and JSON-encoded forms, not booleans', () => {
    const s = collectSecretValues({ a: 'p@ss"w', b: { c: 12345, d: true, e: '' }, f: ['x'] });
    expect(s.has('p@ss"w')).toBe(true);
    expect(s.has('p%40ss%22w')).toBe(true);
    expect(s.has('p@ss\\"w')).toBe(true);
    expect(s.has('12345')).toBe(true);
    expect(s.has('x')).toBe(true);
    expect(s.has('true')).toBe(false);
    expect(s.has('')).toBe(false);
  });

  it('collects each line of a multi-line value (trimmed) and its YAML-quoted form', () => {
    const s = collectSecretValues({
      key: '-----BEGIN PRIVATE KEY-----\r\n  MIIEvQ\nZg==\n\n-----END PRIVATE KEY-----\n',
      t: 'a\tb',
    });
    for (const line of ['-----BEGIN PRIVATE KEY-----', 'MIIEvQ', 'Zg==', '-----END PRIVATE KEY-----']) {
      expect(s.has(line)).toBe(true);
    }
    expect(s.has('')).toBe(false);
    expect(s.has('a\\tb')).toBe(true); // to_yaml writes "a\tb"
  });
});
