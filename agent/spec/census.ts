import type { CensusSpec } from '../model/spec.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/**
 * A hypervisor container's `census:` (issue 12): the command that lists the
 * running domains inside it, one per line (`virsh list --uuid`), and a
 * deadline. spcd lists before it stops the container and again once the new
 * instance is up, and reports a difference (docs/explanation/vm-survival.md).
 */

export const CENSUS_TIMEOUT_MS = 10_000;
export const CENSUS_MAX_TIMEOUT_MS = 300_000;
export const CENSUS_KEYS = ['exec', 'timeout'] as const;

export function readCensus(r: Reader, v: unknown, w: Where, role: string): CensusSpec | undefined {
  const m = r.mapping(v, w, CENSUS_KEYS);
  if (!m) return undefined;
  const before = r.problems.count;
  const at = (k: string): Where => r.child(m, k, w);
  if (role !== 'hypervisor') r.fail(w, 'census applies to the hypervisor container only (role: hypervisor)');
  if (m.exec === undefined) r.fail(w, 'exec is required: the command that lists the running domains');
  const argv = m.exec === undefined ? undefined : r.strings(m.exec, at('exec'), { nonEmpty: true });
  argv?.forEach((a, i) => {
    if (a === '') r.fail(r.child(m.exec as unknown[], i, at('exec')), 'must not be empty');
  });
  const timeoutMs =
    m.timeout === undefined
      ? CENSUS_TIMEOUT_MS
      : r.duration(m.timeout, at('timeout'), 100, CENSUS_MAX_TIMEOUT_MS);
  if (r.problems.count !== before || !argv || timeoutMs === undefined) return undefined;
  return { argv, timeoutMs };
}
