/** Lease times are MicroTime strings (RFC 3339 with microseconds) on the wire. */

/** Epoch milliseconds from a MicroTime string or Date; undefined when absent or unparsable. */
export function fromMicroTime(v: unknown): number | undefined {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.getTime();
  if (typeof v !== 'string' || v === '') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}
