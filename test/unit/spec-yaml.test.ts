import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { Locator } from '../../agent/spec/where.js';
import { parseYaml, YamlProblem } from '../../agent/spec/yaml.js';

/** A small deterministic PRNG so the generated documents are the same every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function gen(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth > 3 || r < 0.35) {
    const k = Math.floor(rand() * 5);
    return ['plain', 42, true, 'with: colon', 'multi\nline\ntext'][k];
  }
  if (r < 0.65) return Array.from({ length: 1 + Math.floor(rand() * 3) }, () => gen(rand, depth + 1));
  const out: Record<string, unknown> = {};
  const n = 1 + Math.floor(rand() * 4);
  for (let i = 0; i < n; i++) out[`k${depth}_${i}_${Math.floor(rand() * 100)}`] = gen(rand, depth + 1);
  return out;
}

/** Every mapping key's recorded line must hold that key's text. */
function checkKeys(value: unknown, loc: Locator, lines: string[], at: string): number {
  let checked = 0;
  if (Array.isArray(value)) {
    value.forEach((v, i) => (checked += checkKeys(v, loc, lines, `${at}[${i}]`)));
  } else if (value !== null && typeof value === 'object') {
    const info = loc.info(value);
    for (const [k, v] of Object.entries(value)) {
      const line = info?.keys?.get(k)?.line;
      expect(line, `${at}.${k}`).toBeDefined();
      expect(lines[(line ?? 0) - 1], `${at}.${k} at line ${line}`).toContain(k);
      checked += 1 + checkKeys(v, loc, lines, `${at}.${k}`);
    }
  }
  return checked;
}

describe('parseYaml line tracking', () => {
  it.each([
    ['block', -1],
    ['flow below depth 2', 2],
    ['flow below depth 1', 1],
  ])('records the line of every key in %s style', (_name, flowLevel) => {
    const rand = rng(7);
    let checked = 0;
    for (let i = 0; i < 60; i++) {
      const doc = { root: gen(rand, 0), other: gen(rand, 0) };
      const text = `# header comment\n\n${yaml.dump(doc, { flowLevel, lineWidth: 40 })}`;
      const loc = new Locator();
      const value = parseYaml(text, 'gen.yaml', loc);
      expect(value).toEqual(doc);
      checked += checkKeys(value, loc, text.split('\n'), '');
    }
    expect(checked).toBeGreaterThan(200);
  });

  it('records item lines of block sequences, including mappings and block scalars', () => {
    const text = [
      'list:',
      '  - a',
      '  - |',
      '    text',
      '    more',
      '  - k: v',
      '    j: w',
      '  -',
      '    - nested',
      '',
    ].join('\n');
    const loc = new Locator();
    const value = parseYaml(text, 'x.yaml', loc) as { list: unknown[] };
    expect(loc.info(value.list)?.items).toEqual([2, 3, 6, 9]);
  });

  it('refuses anchors on keys, scalars, mappings and sequences', () => {
    for (const text of ['&k a: 1\n', 'a: &s 1\n', 'a: &m\n  b: 1\n', 'a: &q [1]\n', 'a:\n  - &i x\n']) {
      expect(() => parseYaml(text, 'x.yaml', new Locator()), text).toThrow(YamlProblem);
    }
  });

  it('keeps timestamps and odd scalars as strings (core schema)', () => {
    const value = parseYaml('d: 2024-01-01\nm: 0600\nh: 0x1f\n', 'x.yaml', new Locator());
    expect(value).toEqual({ d: '2024-01-01', m: 600, h: 31 });
  });
});
