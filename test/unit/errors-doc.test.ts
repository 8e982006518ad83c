import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../agent/errors.js';

/** docs/reference/errors.md keeps one table row per code: `| CODE | status | ... |`. */
function documented(): Map<string, number> {
  const text = readFileSync(new URL('../../docs/reference/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\|\s*([A-Z][A-Z0-9_]+)\s*\|\s*(\d{3})\s*\|/.exec(line);
    if (!m) continue;
    const [, code, status] = m as unknown as [string, string, string];
    expect(rows.has(code), `${code} documented twice`).toBe(false);
    rows.set(code, Number(status));
  }
  return rows;
}

describe('docs/reference/errors.md', () => {
  it('documents exactly the codes of agent/errors.ts, each with its HTTP status', () => {
    const docs = documented();
    const catalogue = new Map(Object.entries(ERRORS).map(([code, def]) => [code, def.status]));
    expect([...docs.keys()].sort()).toEqual([...catalogue.keys()].sort());
    for (const [code, status] of catalogue) expect(docs.get(code), code).toBe(status);
  });
});
