/**
 * `npm run bench:yaml`: the YAML budget against its worst cases. Each case
 * writes 1 or 4 files of just under the 1 MiB per-file cap into a temp sets
 * directory and times validateDir, sampling the resident memory every 5 ms.
 * Run with --expose-gc (the npm script does). One line per case:
 *   yaml_budget case=<name> files=<n> ms=<n> rss_peak_mb=<n> rss_before_mb=<n> outcome=<first problem>
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateDir } from '../agent/spec/load.js';

const CAP = 1024 * 1024 - 16;

const CASES: Record<string, () => string> = {
  // many lists 30 deep (under the depth limit): the shape that took 370 MB per file before the budget
  deep30: () => {
    const unit = `${'['.repeat(30)}${']'.repeat(30)},`;
    return `[${unit.repeat(Math.floor(CAP / unit.length) - 1)}[]]`;
  },
  // one list of ~350k empty lists
  wide: () => `[${'[],'.repeat(Math.floor(CAP / 3) - 1)}[]]`,
  // ~45k keys, each with a small list and mapping
  keys: () => {
    const lines: string[] = [];
    let size = 0;
    for (let i = 0; size < CAP - 40; i++) {
      const line = `k${i}: [a, b, {c: d}]\n`;
      lines.push(line);
      size += line.length;
    }
    return lines.join('');
  },
};

async function run(name: string, files: number): Promise<void> {
  const text = CASES[name]!();
  const dir = mkdtempSync(join(tmpdir(), 'spcd-yaml-bench-'));
  try {
    for (let i = 0; i < files; i++) writeFileSync(join(dir, `s${i}.yaml`), text);
    (globalThis as { gc?: () => void }).gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const started = performance.now();
    const { problems } = await validateDir({ setsDir: dir });
    const ms = performance.now() - started;
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    const mb = (n: number): string => (n / 1024 / 1024).toFixed(0);
    const outcome = problems[0] ? `${problems[0].code}:${problems[0].message.slice(0, 60)}` : 'accepted';
    console.log(
      `yaml_budget case=${name} files=${files} ms=${ms.toFixed(0)} rss_peak_mb=${mb(peak)} rss_before_mb=${mb(before)} outcome=${JSON.stringify(outcome)}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const name of Object.keys(CASES)) for (const files of [1, 4]) await run(name, files);
