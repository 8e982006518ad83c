import yaml from 'js-yaml';
import type { ConfigFileSpec } from '../model/spec.js';

/**
 * Format safety. For INI files a value carrying a line break or NUL could add
 * lines (new keys, new sections) to the file. For YAML and JSON, templates
 * should use the to_yaml / to_json filters, and the rendered text is parsed
 * back to prove it is valid.
 */

export type FileFormat = ConfigFileSpec['format'];

// eslint-disable-next-line no-control-regex
const LINE_BREAKING = /[\r\n\u0000]/;
// eslint-disable-next-line no-control-regex
const LINE_BREAKING_ALL = /[\r\n\u0000]/g;

type Segment = string | number;

/** A value (or a mapping key) that would break an INI line if it reached the output. */
export interface UnsafeValue {
  readonly segments: readonly Segment[];
  readonly kind: 'value' | 'key';
}

export function dottedPath(segments: readonly Segment[]): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += out ? `.${s}` : s;
  }
  return out || '(root)';
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Every string value or mapping key in the tree that contains \n, \r or NUL. */
export function findLineBreakingValues(values: unknown): UnsafeValue[] {
  const out: UnsafeValue[] = [];
  const walk = (v: unknown, segs: Segment[]): void => {
    if (typeof v === 'string') {
      if (LINE_BREAKING.test(v)) out.push({ segments: segs, kind: 'value' });
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, [...segs, i]));
    } else if (isMapping(v)) {
      for (const [k, child] of Object.entries(v)) {
        if (LINE_BREAKING.test(k)) out.push({ segments: [...segs, k], kind: 'key' });
        walk(child, [...segs, k]);
      }
    }
  };
  walk(values, []);
  return out;
}

function sanitize(s: string): string {
  return s.replace(LINE_BREAKING_ALL, ' ');
}

/** A copy of `values` where only the one unsafe value (or key) has its line breaks replaced by spaces. */
export function withSanitized(values: Record<string, unknown>, target: UnsafeValue): Record<string, unknown> {
  const rebuild = (v: unknown, depth: number): unknown => {
    if (depth === target.segments.length) {
      return target.kind === 'value' && typeof v === 'string' ? sanitize(v) : v;
    }
    const seg = target.segments[depth];
    if (Array.isArray(v) && typeof seg === 'number') {
      return v.map((item, i) => (i === seg ? rebuild(item, depth + 1) : item));
    }
    if (isMapping(v) && typeof seg === 'string') {
      const out: Record<string, unknown> = {};
      for (const [k, child] of Object.entries(v)) {
        if (k !== seg) out[k] = child;
        else if (target.kind === 'key' && depth === target.segments.length - 1) out[sanitize(k)] = child;
        else out[k] = rebuild(child, depth + 1);
      }
      return out;
    }
    return v;
  };
  return rebuild(values, 0) as Record<string, unknown>;
}

/** Parse rendered YAML/JSON back; the error text, or undefined when it parses. */
export function parseBackProblem(format: FileFormat, content: string): string | undefined {
  try {
    if (format === 'json') JSON.parse(content);
    else if (format === 'yaml') yaml.load(content, { schema: yaml.CORE_SCHEMA });
    return undefined;
  } catch (err) {
    if (err instanceof yaml.YAMLException) {
      const line = typeof err.mark?.line === 'number' ? ` at line ${err.mark.line + 1}` : '';
      return `${err.reason || 'invalid YAML'}${line}`;
    }
    return err instanceof Error ? err.message : String(err);
  }
}
