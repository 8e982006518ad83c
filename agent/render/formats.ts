import yaml from 'js-yaml';
import { describeJsonFault, jsonFault } from '../model/json-where.js';
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

/**
 * Parse rendered YAML/JSON back; the problem as a line, a column and what is
 * wrong, or undefined when it parses. Nothing of the rendered text is quoted:
 * it may hold a secret (docs/explanation/security.md, "Masking").
 */
export function parseBackProblem(format: FileFormat, content: string): string | undefined {
  if (format === 'json') {
    try {
      JSON.parse(content);
      return undefined;
    } catch {
      const fault = jsonFault(content);
      return fault ? describeJsonFault(fault) : 'not valid JSON';
    }
  }
  if (format !== 'yaml') return undefined;
  try {
    yaml.load(content, { schema: yaml.CORE_SCHEMA });
    return undefined;
  } catch (err) {
    if (!(err instanceof yaml.YAMLException)) throw err;
    return yamlProblemText(err);
  }
}

/**
 * js-yaml's reason names the fault, and a few reasons quote what they met (an
 * unknown tag, an alias): the quoted parts are cut.
 */
export function yamlReason(err: InstanceType<typeof yaml.YAMLException>): string {
  return (err.reason || 'invalid YAML').replace(/"[^"]*"|'[^']*'|<[^>]*>|![^\s,]*/g, '(…)');
}

/** The line, the column and the reason of a YAML fault, nothing of the text quoted. */
export function yamlProblemText(err: InstanceType<typeof yaml.YAMLException>): string {
  const reason = yamlReason(err);
  const m = err.mark;
  const at =
    typeof m?.line === 'number'
      ? `line ${m.line + 1}${typeof m.column === 'number' ? `, column ${m.column + 1}` : ''}: `
      : '';
  return `${at}${reason}`;
}
