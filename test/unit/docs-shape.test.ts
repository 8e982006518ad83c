import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../agent/cli/args.js';
import { FLAGS } from '../../agent/daemon/settings.js';
import { REPO } from '../support/daemon.js';

/**
 * The docs keep their shape (docs/README.md: a tutorial, how-to guides,
 * reference, explanation, figures and decision records): every page is
 * reachable from README.md by links, every relative link resolves (the file,
 * and the heading its #anchor names), no page is over 400 lines, and the
 * flags reference names every flag and command the code has.
 */
const MAX_LINES = 400;

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdownFiles(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

/** The lines outside fenced code blocks, with inline code spans blanked. */
function proseLines(text: string): { line: string; n: number }[] {
  let fenced = false;
  const out: { line: string; n: number }[] = [];
  text.split('\n').forEach((raw, i) => {
    if (/^\s*(```|~~~)/.test(raw)) {
      fenced = !fenced;
      return;
    }
    if (!fenced) out.push({ line: raw.replace(/`[^`]*`/g, '``'), n: i + 1 });
  });
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const s = slug(m[1]!);
    const n = seen.get(s);
    seen.set(s, n === undefined ? 0 : n + 1);
    out.add(n === undefined ? s : `${s}-${n + 1}`);
  }
  return out;
}

interface Link {
  from: string;
  n: number;
  target: string;
}

function linksOf(file: string): Link[] {
  return proseLines(readFileSync(file, 'utf8')).flatMap(({ line, n }) =>
    [...line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => ({ from: file, n, target: m[1]! })),
  );
}

const external = (t: string): boolean => /^[a-z][a-z0-9+.-]*:/i.test(t);

/** The file or folder a relative link names, and its anchor. */
function resolveLink(l: Link): { path: string; anchor: string } {
  const [path = '', anchor = ''] = l.target.split('#', 2) as [string?, string?];
  return { path: path === '' ? l.from : resolve(dirname(l.from), decodeURI(path)), anchor };
}

const README = join(REPO, 'README.md');
const DOCS = join(REPO, 'docs');
const pages = [README, ...markdownFiles(DOCS)];
const rel = (f: string): string => relative(REPO, f);

describe('the docs keep their shape', () => {
  it('slugs headings as GitHub does', () => {
    expect(slug("Warming qemu's capabilities cache: the 9 → 11 window before and after")).toBe(
      'warming-qemus-capabilities-cache-the-9--11-window-before-and-after',
    );
    expect(slug('Per-host overrides (`/etc/spcd/overrides.yaml`)')).toBe(
      'per-host-overrides-etcspcdoverridesyaml',
    );
    expect(slug('`spcctl fleet status`')).toBe('spcctl-fleet-status');
  });

  it('every relative link resolves, to a file or folder and to a heading of the page', () => {
    const broken: string[] = [];
    for (const page of pages)
      for (const l of linksOf(page)) {
        if (external(l.target)) continue;
        const { path, anchor } = resolveLink(l);
        if (!existsSync(path)) broken.push(`${rel(l.from)}:${l.n}: ${l.target}: no such file`);
        else if (anchor && path.endsWith('.md') && !anchorsOf(path).has(anchor))
          broken.push(`${rel(l.from)}:${l.n}: ${l.target}: no heading #${anchor} in ${rel(path)}`);
      }
    expect(broken).toEqual([]);
  });

  it('every page under docs/ is reachable from README.md by links (a folder link reaches the pages in it)', () => {
    const reached = new Set<string>([README]);
    const queue = [README];
    while (queue.length > 0) {
      const page = queue.shift()!;
      for (const l of linksOf(page)) {
        if (external(l.target)) continue;
        const { path } = resolveLink(l);
        if (!existsSync(path)) continue;
        const found = statSync(path).isDirectory()
          ? readdirSync(path)
              .filter((f) => f.endsWith('.md'))
              .map((f) => join(path, f))
          : path.endsWith('.md')
            ? [path]
            : [];
        for (const f of found)
          if (!reached.has(f)) {
            reached.add(f);
            queue.push(f);
          }
      }
    }
    expect(pages.filter((p) => !reached.has(p)).map(rel)).toEqual([]);
  });

  it(`no page is over ${MAX_LINES} lines`, () => {
    const long = pages
      .map((p) => ({ p: rel(p), lines: readFileSync(p, 'utf8').trimEnd().split('\n').length }))
      .filter((x) => x.lines > MAX_LINES)
      .map((x) => `${x.p}: ${x.lines} lines`);
    expect(long).toEqual([]);
  });

  it('the flags reference names every spcd flag (with its variable and default) and every spcctl command', () => {
    const doc = readFileSync(join(DOCS, 'reference/flags.md'), 'utf8');
    const rows = new Map(
      doc
        .split('\n')
        .map((line) => [/^\| `(--[a-z-]+)` \|/.exec(line)?.[1], line] as const)
        .filter((r): r is readonly [string, string] => r[0] !== undefined),
    );
    for (const [name, def] of Object.entries(FLAGS)) {
      const row = rows.get(`--${name}`);
      expect(row, `--${name}`).toBeDefined();
      expect(row, `--${name}`).toContain(`\`${def.env}\``);
      if (def.def !== undefined) expect(row, `--${name}`).toContain(`\`${def.def}\``);
    }
    for (const [name, cmd] of Object.entries(COMMANDS))
      if (!cmd.hidden)
        expect(doc, name).toContain(`| \`${name}\` | \`${cmd.usage.replace(/\|/g, '\\|')}\` |`);
  });
});
