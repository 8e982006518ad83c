import type { ErrorCode } from '../errors.js';
import { formatMs, MAX_DURATION_MS, parseDuration, parseSize } from '../model/units.js';
import type { Problems } from './problems.js';
import type { Locator, Where } from './where.js';

/**
 * Typed readers over parsed YAML values. Each reports a problem at the exact
 * Where and returns undefined on bad input, so a caller can go on checking the
 * other fields and report every problem in one pass.
 */

export type Mapping = Record<string, unknown>;

export function isMapping(v: unknown): v is Mapping {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function typeName(v: unknown): string {
  if (v === null || v === undefined) return 'empty';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'number') return 'a number';
  if (typeof v === 'boolean') return 'a boolean';
  return typeof v;
}

const FORBIDDEN_KEYS = new Set(['__proto__']);

export class Reader {
  constructor(
    readonly loc: Locator,
    readonly problems: Problems,
    readonly code: ErrorCode = 'SPEC_INVALID',
  ) {}

  /** The same reader reporting under another error code (e.g. CHECK_INVALID). */
  withCode(code: ErrorCode): Reader {
    return new Reader(this.loc, this.problems, code);
  }

  fail(where: Where, message: string, code: ErrorCode = this.code): void {
    this.problems.add(where, message, code);
  }

  child(parent: unknown, key: string | number, where: Where): Where {
    return this.loc.child(parent, key, where);
  }

  /** A mapping whose keys must all be in `allowed` (when given). */
  mapping(value: unknown, where: Where, allowed?: readonly string[]): Mapping | undefined {
    if (!isMapping(value)) {
      this.fail(where, `must be a mapping, not ${typeName(value)}`);
      return undefined;
    }
    let ok = true;
    for (const key of Object.keys(value)) {
      if (FORBIDDEN_KEYS.has(key)) {
        this.fail(this.child(value, key, where), `key "${key}" is not allowed`);
        ok = false;
      } else if (allowed && !allowed.includes(key)) {
        this.fail(this.child(value, key, where), `unknown key "${key}" (allowed: ${allowed.join(', ')})`);
      }
    }
    return ok ? value : undefined;
  }

  /**
   * Free-form data (set `defaults`, override `values`): any YAML value, but no
   * `__proto__` key at any depth, so a later deep merge cannot pollute prototypes.
   */
  data(value: unknown, where: Where): Mapping | undefined {
    const m = this.mapping(value, where);
    if (!m) return undefined;
    const before = this.problems.count;
    const walk = (v: unknown, w: Where): void => {
      if (Array.isArray(v)) v.forEach((item, i) => walk(item, this.child(v, i, w)));
      else if (isMapping(v)) {
        for (const k of Object.keys(v)) {
          const kw = this.child(v, k, w);
          if (FORBIDDEN_KEYS.has(k)) this.fail(kw, `key "${k}" is not allowed`);
          else walk(v[k], kw);
        }
      }
    };
    for (const k of Object.keys(m)) walk(m[k], this.child(m, k, where));
    return this.problems.count === before ? m : undefined;
  }

  list(value: unknown, where: Where): unknown[] | undefined {
    if (!Array.isArray(value)) {
      this.fail(where, `must be a list, not ${typeName(value)}`);
      return undefined;
    }
    return value;
  }

  string(value: unknown, where: Where, opts: { pattern?: RegExp; what?: string } = {}): string | undefined {
    if (typeof value !== 'string') {
      this.fail(where, `must be a string, not ${typeName(value)}`);
      return undefined;
    }
    if (value === '') {
      this.fail(where, 'must not be empty');
      return undefined;
    }
    if (opts.pattern && !opts.pattern.test(value)) {
      this.fail(
        where,
        `${JSON.stringify(value)} is not ${opts.what ?? `a match for ${String(opts.pattern)}`}`,
      );
      return undefined;
    }
    return value;
  }

  /** An absolute path without "..", "." or empty segments. */
  absPath(value: unknown, where: Where): string | undefined {
    const s = this.string(value, where);
    if (s === undefined) return undefined;
    if (!s.startsWith('/')) {
      this.fail(where, `${JSON.stringify(s)} must be an absolute path`);
      return undefined;
    }
    if (
      s !== '/' &&
      s
        .slice(1)
        .split('/')
        .some((seg) => seg === '..' || seg === '.' || seg === '')
    ) {
      this.fail(where, `${JSON.stringify(s)} must not contain "..", "." or empty segments, nor end in "/"`);
      return undefined;
    }
    if (s.includes(':') || /[\s\0]/.test(s)) {
      this.fail(where, `${JSON.stringify(s)} must not contain ":" or white space`);
      return undefined;
    }
    return s;
  }

  /** A relative path that stays below its base: no leading "/", no ".." segment. */
  relPath(value: unknown, where: Where): string | undefined {
    const s = this.string(value, where);
    if (s === undefined) return undefined;
    if (s.startsWith('/')) {
      this.fail(where, `${JSON.stringify(s)} must be a relative path`);
      return undefined;
    }
    if (s.split('/').some((seg) => seg === '..' || seg === '.' || seg === '') || s.includes('\0')) {
      this.fail(where, `${JSON.stringify(s)} must not contain "..", "." or empty segments`);
      return undefined;
    }
    return s;
  }

  boolean(value: unknown, where: Where): boolean | undefined {
    if (typeof value !== 'boolean') {
      this.fail(where, `must be true or false, not ${typeName(value)}`);
      return undefined;
    }
    return value;
  }

  integer(value: unknown, where: Where, min: number, max: number): number | undefined {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      this.fail(where, `must be an integer, not ${typeName(value)}`);
      return undefined;
    }
    if (value < min || value > max) {
      this.fail(where, `must be between ${min} and ${max}, not ${value}`);
      return undefined;
    }
    return value;
  }

  oneOf<T extends string>(value: unknown, where: Where, allowed: readonly T[]): T | undefined {
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      const shown = typeof value === 'string' ? JSON.stringify(value) : typeName(value);
      this.fail(where, `must be one of ${allowed.join(', ')} (got ${shown})`);
      return undefined;
    }
    return value as T;
  }

  /** A size: "64m", "1g", "512k" or an integer of bytes. */
  size(value: unknown, where: Where, min: number, max: number = Number.MAX_SAFE_INTEGER): number | undefined {
    const n = parseSize(value);
    if (n === undefined) {
      this.fail(where, `${show(value)} is not a size (e.g. 64m, 1g, 512k, or bytes)`);
      return undefined;
    }
    if (n < min || n > max) {
      this.fail(where, `${show(value)} must be between ${min} and ${max} bytes`);
      return undefined;
    }
    return n;
  }

  /** A duration: "500ms", "10s", "5m", "1h" or an integer of milliseconds, at most MAX_DURATION_MS. */
  duration(value: unknown, where: Where, minMs: number, maxMs: number = MAX_DURATION_MS): number | undefined {
    const n = parseDuration(value);
    if (n === undefined) {
      this.fail(where, `${show(value)} is not a duration (e.g. 500ms, 10s, 5m, 1h, or milliseconds)`);
      return undefined;
    }
    if (n < minMs) {
      this.fail(where, `${show(value)} must be at least ${minMs} ms`);
      return undefined;
    }
    if (n > maxMs) {
      this.fail(where, `${show(value)} must be at most ${formatMs(maxMs)} (${maxMs} ms)`);
      return undefined;
    }
    return n;
  }

  /** A list of non-empty strings. */
  strings(value: unknown, where: Where, opts: { nonEmpty?: boolean } = {}): string[] | undefined {
    const items = this.list(value, where);
    if (!items) return undefined;
    if (opts.nonEmpty && items.length === 0) {
      this.fail(where, 'must not be an empty list');
      return undefined;
    }
    const out: string[] = [];
    let ok = true;
    items.forEach((item, i) => {
      const w = this.child(items, i, where);
      if (typeof item !== 'string') {
        const hint =
          typeof item === 'number' || typeof item === 'boolean' ? ` (quote it: "${String(item)}")` : '';
        this.fail(w, `must be a string, not ${typeName(item)}${hint}`);
        ok = false;
      } else out.push(item);
    });
    return ok ? out : undefined;
  }

  /** A scalar string, number or boolean, as a string (environment, labels, sysctls). */
  scalarText(value: unknown, where: Where): string | undefined {
    if (typeof value === 'string') return value;
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    if (typeof value === 'boolean') return value ? 'true' : 'false';
    this.fail(where, `must be a string, number or boolean, not ${typeName(value)}`);
    return undefined;
  }

  /** A mapping of key -> scalar text, returned with sorted keys. */
  textMap(
    value: unknown,
    where: Where,
    key: {
      pattern: RegExp;
      what: string;
      check?: (k: string) => string | undefined;
      /** Refuse values holding NUL, CR or LF (environment, sysctls: they end at a NUL and forge lines). */
      lineSafe?: boolean;
    },
  ): Record<string, string> | undefined {
    const m = this.mapping(value, where);
    if (!m) return undefined;
    let ok = true;
    const entries: [string, string][] = [];
    for (const k of Object.keys(m)) {
      const w = this.child(m, k, where);
      if (!key.pattern.test(k)) {
        this.fail(w, `${JSON.stringify(k)} is not ${key.what}`);
        ok = false;
        continue;
      }
      const extra = key.check?.(k);
      if (extra) {
        this.fail(w, extra);
        ok = false;
        continue;
      }
      const v = this.scalarText(m[k], w);
      if (v === undefined) ok = false;
      else if (key.lineSafe && /[\0\r\n]/.test(v)) {
        this.fail(w, 'must not contain NUL, carriage return or newline characters');
        ok = false;
      } else entries.push([k, v]);
    }
    return ok ? sortedRecord(entries) : undefined;
  }
}

function show(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' ? JSON.stringify(v) : typeName(v);
}

export function sortedRecord<T>(entries: readonly [string, T][]): Record<string, T> {
  const out: Record<string, T> = {};
  for (const [k, v] of [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) out[k] = v;
  return out;
}

export function byKey<T>(key: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };
}
