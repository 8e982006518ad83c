/**
 * Friendly units, converted once at load time (architecture habit 7).
 * Sizes: "64m", "1g", "512k", "100b" or a bare integer of bytes.
 * Durations: "30s", "500ms", "2m", "1h" or a bare integer of milliseconds.
 */

const SIZE_UNITS: Record<string, number> = {
  b: 1,
  k: 1024,
  kb: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
};

/**
 * The longest duration any setting or definition field accepts: 24 hours.
 * Node runs a timer longer than 2^31-1 ms (about 24.8 days) after 1 ms, so
 * every value that reaches a timer must stay well below that, sums included.
 */
export const MAX_DURATION_MS = 24 * 3_600_000;

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseSize(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  if (!m) return undefined;
  const unit = (m[2] ?? '').toLowerCase() || 'b';
  const mult = SIZE_UNITS[unit];
  if (mult === undefined) return undefined;
  const bytes = Math.round(Number(m[1]) * mult);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

export function parseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
  if (!m) return undefined;
  const mult = DURATION_UNITS[m[2] ?? 'ms'] ?? 1;
  const ms = Math.round(Number(m[1]) * mult);
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** 86400000 -> "24h", 90000 -> "90s", 1500 -> "1500ms". */
export function formatMs(ms: number): string {
  if (ms > 0 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms > 0 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms > 0 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
