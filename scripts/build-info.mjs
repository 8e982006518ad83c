/* global process */
// Writes dist/build-info.json for agent/version.ts: package.json's version,
// the git commit (`git rev-parse --short=12 HEAD`, "-dirty" when the work
// tree has changes; "unknown" outside a git checkout; SPCD_BUILD_COMMIT
// overrides) and the build date (SOURCE_DATE_EPOCH when set, for
// reproducible builds, else now), in UTC to the second. Run by `npm run build`.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(resolve(root, process.argv[2] ?? 'dist'), 'build-info.json');

function git(args) {
  return execFileSync('git', args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
}

function commit() {
  if (process.env.SPCD_BUILD_COMMIT) return process.env.SPCD_BUILD_COMMIT;
  try {
    const head = git(['rev-parse', '--short=12', 'HEAD']);
    let dirty = false;
    try {
      dirty = git(['status', '--porcelain', '--untracked-files=no']).length > 0;
    } catch {
      dirty = false;
    }
    return dirty ? `${head}-dirty` : head;
  } catch {
    return 'unknown';
  }
}

function date() {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const ms = epoch !== undefined && /^\d+$/.test(epoch) ? Number(epoch) * 1000 : Date.now();
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const info = { version: pkg.version, commit: commit(), date: date() };
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(info)}\n`);
