/**
 * Maintenance windows: when nodes may start an upgrade. Either a recurring
 * window, a cron expression (5 fields, parsed by node-cron, matched here on
 * the wall clock of `timezone`, UTC by default) that opens it for `duration`,
 * or one absolute range [from, to). Pure: the time is an argument.
 */
import { parse as parseCron, validateDetailed } from 'node-cron';
import { parseDuration } from '../model/units.js';

const MINUTE = 60_000;
const MAX_WINDOW_MS = 7 * 24 * 3_600_000;
/** How far ahead opensAt looks for a recurring window's next start. */
const LOOKAHEAD_MS = 8 * 24 * 3_600_000;

export type Window =
  | {
      readonly kind: 'cron';
      readonly cron: string;
      readonly durationMs: number;
      readonly timezone: string;
      readonly fields: ReturnType<typeof parseCron>;
      readonly format: Intl.DateTimeFormat;
    }
  | { readonly kind: 'range'; readonly from: number; readonly to: number };

/** A problem in one window; `field` is the key inside it. */
export class WindowProblem extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function instant(v: unknown, field: string): number {
  const t = typeof v === 'string' && /T.*(Z|[+-]\d\d:\d\d)$/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(t))
    throw new WindowProblem(field, `must be an RFC 3339 time with a zone, like 2026-11-28T22:00:00Z`);
  return t;
}

export function parseWindow(raw: unknown): Window {
  if (!isMap(raw)) throw new WindowProblem('', 'must be a map: {cron, duration, timezone} or {from, to}');
  if (raw.cron !== undefined) {
    for (const k of Object.keys(raw))
      if (!['cron', 'duration', 'timezone'].includes(k))
        throw new WindowProblem(k, 'is not a field of a cron window (cron, duration, timezone)');
    if (typeof raw.cron !== 'string' || raw.cron.trim().split(/\s+/).length !== 5)
      throw new WindowProblem('cron', 'must be a 5-field cron expression (minute hour day month weekday)');
    const check = validateDetailed(raw.cron);
    if (!check.valid)
      throw new WindowProblem('cron', check.errors.map((e) => `${e.field}: ${e.message}`).join('; '));
    const fields = parseCron(raw.cron);
    if ([...fields.dayOfMonth, ...fields.dayOfWeek].some((x) => typeof x !== 'number'))
      throw new WindowProblem('cron', 'L and nth-weekday tokens are not supported in windows');
    const durationMs = parseDuration(raw.duration);
    if (durationMs === undefined || durationMs < MINUTE || durationMs > MAX_WINDOW_MS)
      throw new WindowProblem('duration', 'must be a duration from 1m to 168h, like 4h');
    const timezone = raw.timezone === undefined ? 'UTC' : raw.timezone;
    let format: Intl.DateTimeFormat;
    try {
      if (typeof timezone !== 'string') throw new RangeError('not a string');
      format = new Intl.DateTimeFormat('en-US', {
        timeZone: timezone,
        hourCycle: 'h23',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        weekday: 'short',
      });
    } catch {
      throw new WindowProblem(
        'timezone',
        `must be an IANA time zone like Europe/Berlin, got ${JSON.stringify(timezone)}`,
      );
    }
    return { kind: 'cron', cron: raw.cron, durationMs, timezone: timezone as string, fields, format };
  }
  if (raw.from !== undefined || raw.to !== undefined) {
    for (const k of Object.keys(raw))
      if (!['from', 'to'].includes(k))
        throw new WindowProblem(k, 'is not a field of a range window (from, to)');
    const from = instant(raw.from, 'from');
    const to = instant(raw.to, 'to');
    if (to <= from) throw new WindowProblem('to', 'must be after from');
    return { kind: 'range', from, to };
  }
  throw new WindowProblem('', 'must have cron (with duration) or from and to');
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

interface Local {
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly weekday: number;
}

function local(format: Intl.DateTimeFormat, t: number): Local {
  const p: Record<string, string> = {};
  for (const part of format.formatToParts(t)) p[part.type] = part.value;
  return {
    month: Number(p.month),
    day: Number(p.day),
    hour: Number(p.hour),
    minute: Number(p.minute),
    weekday: WEEKDAYS[p.weekday ?? ''] ?? -1,
  };
}

/** The first minute at or after `from` (and at or before `until`) the window's cron starts; undefined if none. */
function nextStart(w: Extract<Window, { kind: 'cron' }>, from: number, until: number): number | undefined {
  const f = w.fields;
  const dow = (d: number): boolean => f.dayOfWeek.includes(d) || (d === 0 && f.dayOfWeek.includes(7));
  let t = Math.ceil(from / MINUTE) * MINUTE;
  while (t <= until) {
    const l = local(w.format, t);
    const dayOk = f.month.includes(l.month) && f.dayOfMonth.includes(l.day) && dow(l.weekday);
    if (!dayOk) {
      // to the next local midnight, less an hour in case a DST change shortens the day
      t += Math.max(1, (24 - l.hour - 1) * 60 - l.minute) * MINUTE;
      continue;
    }
    if (!f.hour.includes(l.hour)) {
      t += (60 - l.minute) * MINUTE;
      continue;
    }
    if (f.minute.includes(l.minute)) return t;
    t += MINUTE;
  }
  return undefined;
}

/** Whether the window is open at `now`. */
export function isOpen(w: Window, now: number): boolean {
  if (w.kind === 'range') return w.from <= now && now < w.to;
  return nextStart(w, now - w.durationMs + 1, now) !== undefined;
}

/** When the window next opens after `now` (now when open); undefined when never (a past range) or not within 8 days. */
export function opensAt(w: Window, now: number): number | undefined {
  if (isOpen(w, now)) return now;
  if (w.kind === 'range') return w.from > now ? w.from : undefined;
  return nextStart(w, now + 1, now + LOOKAHEAD_MS);
}

/** Whether any window is open (no windows: always), and when one opens next. */
export function windowState(
  windows: readonly Window[],
  now: number,
): { readonly open: boolean; readonly opensAt?: number } {
  if (windows.length === 0 || windows.some((w) => isOpen(w, now))) return { open: true };
  const next = windows.map((w) => opensAt(w, now)).filter((t): t is number => t !== undefined);
  return next.length > 0 ? { open: false, opensAt: Math.min(...next) } : { open: false };
}
