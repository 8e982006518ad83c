/**
 * The domain census of a hypervisor container (issue 12): the domains its
 * hypervisor lists before spcd stops it, compared with what the new instance
 * lists once it is up. Pure: parsing and comparing only.
 */

/** The longest listing kept (domains); a longer one is cut and says so. */
export const CENSUS_MAX_DOMAINS = 4096;

/**
 * One listing's output -> the domains it names: one per non-empty line,
 * trimmed, de-duplicated, sorted. `virsh list --uuid` and `virsh list --name`
 * print exactly that (and a trailing empty line).
 */
export function parseCensusListing(output: string): string[] {
  const names = new Set<string>();
  for (const line of output.split('\n')) {
    const t = line.trim();
    if (t !== '') names.add(t);
    if (names.size >= CENSUS_MAX_DOMAINS) break;
  }
  return [...names].sort();
}

export interface CensusComparison {
  readonly ok: boolean;
  /** Listed before the stop, not after: domains the new hypervisor does not know (the orphan case). */
  readonly missing: readonly string[];
  /** Listed after, not before (a domain started meanwhile, or an autostart). */
  readonly added: readonly string[];
}

/** The census matches when both listings name the same domains. */
export function compareCensus(before: readonly string[], after: readonly string[]): CensusComparison {
  const b = new Set(before);
  const a = new Set(after);
  const missing = [...b].filter((d) => !a.has(d)).sort();
  const added = [...a].filter((d) => !b.has(d)).sort();
  return { ok: missing.length === 0 && added.length === 0, missing, added };
}

/** A short, human sentence for logs, events and lastError. */
export function describeMismatch(
  container: string,
  action: string,
  before: readonly string[],
  after: readonly string[],
  c: CensusComparison,
): string {
  const list = (xs: readonly string[]): string =>
    xs.length <= 5 ? xs.join(', ') : `${xs.slice(0, 5).join(', ')} and ${xs.length - 5} more`;
  const parts: string[] = [];
  if (c.missing.length > 0) parts.push(`${c.missing.length} missing (${list(c.missing)})`);
  if (c.added.length > 0) parts.push(`${c.added.length} new (${list(c.added)})`);
  return `domain census of ${container} differs after ${action}: ${before.length} domain(s) listed before the stop, ${after.length} after; ${parts.join('; ')}`;
}
