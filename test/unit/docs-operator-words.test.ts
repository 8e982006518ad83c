import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';

/**
 * The docs are for operators: no page (README.md, docs/, the decision
 * records included) names an issue of the tracker, a work branch, a helper's
 * run or a work session. What a change measured is dated and given with its
 * command; its history lives in the decision records, in operators' words.
 */
const RULES: readonly { what: string; re: RegExp }[] = [
  { what: 'an issue number', re: /\bissues? ?#?\d+/i },
  { what: 'a work branch', re: /\bh-[a-z][a-z0-9-]*\b|\bwork ?branch(es)?\b/i },
  {
    what: 'a work session',
    re: /\b(first|second|third|this|that|last|next|earlier|previous|another) session\b|\bsession leases?\b|\bwith the session\b|\bthe stop that (finished|closed|ended)\b/i,
  },
  {
    what: "a helper's work",
    re: /\bother helpers\b|\bhelpers' (runs?|builds?|tests?)\b|\ba helper's (runs?|builds?|tests?)\b/i,
  },
];

/** Every rule a line breaks. */
function broken(line: string): string[] {
  return RULES.filter((r) => r.re.test(line)).map((r) => r.what);
}

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdownFiles(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

describe("the docs speak to operators, not of the project's work", () => {
  it('the rules catch what they are for, and leave ordinary words alone', () => {
    for (const bad of [
      'Before the fixes of issue #13 the first runs stopped',
      'Rendered from templates (issue #6).',
      'Issue 12 part 5 asks the window to shrink',
      '**With the registry** (h-metrics, 2026-11-24)',
      'Latest (2026-11-24, second session, main merged)',
      "at load 2.4 with a helper's tests running",
      "load 12-23 from other helpers' runs",
      'measured at the end of the stop that finished it',
      'as etcd keeps one session lease per client',
      'the key alive with the session',
    ])
      expect(broken(bad), bad).not.toEqual([]);
    for (const fine of [
      'one lease per node for as long as it follows (etcd)',
      "the helper's own BARRIER=1",
      'rootwrap helpers; privsep-helper',
      'the health check runs every 30 s',
      'a stop that passes its deadline',
      'repeat the stop that lost the domain',
      'BuildKit sessions',
    ])
      expect(broken(fine), fine).toEqual([]);
  });

  it('no page names an issue, a work branch, a helper or a session', () => {
    const files = [join(REPO, 'README.md'), ...markdownFiles(join(REPO, 'docs'))];
    expect(files.length).toBeGreaterThan(10);
    const found = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          broken(line).map((what) => `${relative(REPO, f)}:${i + 1}: ${what}: ${line.trim()}`),
        ),
    );
    expect(found).toEqual([]);
  });
});
