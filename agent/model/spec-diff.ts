/**
 * What changed between two container specs, field by field (for `spcctl
 * generations NAME --diff A B`). Pure. Objects are walked key by key; a list
 * of objects that all carry a distinct name (name, target, dest, ...) is
 * walked by that name, so inserting a bind does not show every later bind as
 * changed; any other list (command, capAdd) is one value.
 */
import type { ContainerSpec } from './spec.js';
import { canonicalJson } from './hash.js';

export interface SpecChange {
  /** e.g. "image", "environment.DEBUG", "binds[target=/etc/nova].readOnly", "healthchecks[name=port].timeoutMs". */
  readonly path: string;
  /** Absent when the field is new in the later spec. */
  readonly from?: unknown;
  /** Absent when the field is gone from the later spec. */
  readonly to?: unknown;
}

/** Fields that do not describe the container (where the definition was read from). */
const IGNORED: ReadonlySet<string> = new Set(['source']);
const LIST_KEYS = ['name', 'target', 'dest', 'containerPath', 'path'] as const;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The key a list is walked by: one every element has, distinct, as a string; undefined when none fits. */
function listKey(a: readonly unknown[], b: readonly unknown[]): string | undefined {
  const all = [...a, ...b];
  if (all.length === 0 || !all.every(isObject)) return undefined;
  return LIST_KEYS.find((k) => {
    const distinct = (l: readonly unknown[]): boolean => {
      const seen = l.map((e) => (e as Json)[k]);
      return seen.every((v) => typeof v === 'string') && new Set(seen).size === seen.length;
    };
    return distinct(a) && distinct(b);
  });
}

function walk(path: string, from: unknown, to: unknown, out: SpecChange[]): void {
  if (from === undefined && to === undefined) return;
  if (isObject(from) && isObject(to)) {
    const keys = [...new Set([...Object.keys(from), ...Object.keys(to)])].sort();
    for (const k of keys) walk(path ? `${path}.${k}` : k, from[k], to[k], out);
    return;
  }
  if (Array.isArray(from) && Array.isArray(to)) {
    const key = listKey(from, to);
    if (key !== undefined) {
      const byKey = (l: readonly unknown[]): Map<string, unknown> =>
        new Map(l.map((e) => [(e as Json)[key] as string, e]));
      const a = byKey(from);
      const b = byKey(to);
      for (const k of [...new Set([...a.keys(), ...b.keys()])])
        walk(`${path}[${key}=${k}]`, a.get(k), b.get(k), out);
      return;
    }
  }
  if (from !== undefined && to !== undefined && canonicalJson(from) === canonicalJson(to)) return;
  out.push({ path, ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) });
}

/** Every field whose value differs between `from` and `to`, in a stable order. */
export function specChanges(from: ContainerSpec, to: ContainerSpec): SpecChange[] {
  const strip = (s: ContainerSpec): Json =>
    Object.fromEntries(Object.entries(s).filter(([k]) => !IGNORED.has(k)));
  const out: SpecChange[] = [];
  walk('', strip(from), strip(to), out);
  return out;
}
