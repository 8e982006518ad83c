/**
 * spcd's version, the git commit it was built from and the build date.
 *
 * The version is package.json's. The commit and the date come from
 * dist/build-info.json, written by `npm run build` (scripts/build-info.mjs):
 * the commit from `git rev-parse`, "unknown" outside a git checkout; the date
 * from SOURCE_DATE_EPOCH when set (reproducible builds), else the build's
 * clock. Code run from the sources (the tests) has no build-info file: both
 * read "unknown".
 */
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  readonly version: string;
  readonly commit: string;
  /** ISO 8601, UTC, to the second; "unknown" when not built. */
  readonly date: string;
}

function readJson(url: URL): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(readFileSync(url, 'utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

let cached: BuildInfo | undefined;

/** Read once: package.json (two levels up from dist/ or agent/) and build-info.json next to this module. */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  const pkg = readJson(new URL('../package.json', import.meta.url));
  const built = readJson(new URL('./build-info.json', import.meta.url));
  cached = {
    version: str(pkg?.version) ?? str(built?.version) ?? '0.0.0',
    commit: str(built?.commit) ?? 'unknown',
    date: str(built?.date) ?? 'unknown',
  };
  return cached;
}

/** `NAME VERSION (commit C, built D)`: what `spcd --version` and `spcctl --version` print. */
export function formatVersion(name: string, info: BuildInfo): string {
  return `${name} ${info.version} (commit ${info.commit}, built ${info.date})`;
}
