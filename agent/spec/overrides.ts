import { CONTAINER_NAME } from './container.js';
import { isMapping, type Mapping, type Reader } from './read.js';
import type { KeyPos, Where } from './where.js';

/**
 * The per-host override file. Its container entries are merged into the raw
 * container mappings before validation, keeping each field's own position, so
 * a bad overridden value is reported at the override file's line.
 */

export const OVERRIDE_KEYS = ['containers', 'values'] as const;
/** Container fields merged key by key; every other field is replaced whole. */
export const MERGED_FIELDS: readonly string[] = ['environment', 'labels', 'sysctls', 'ulimits'];

export interface ContainerOverride {
  readonly raw: Mapping;
  readonly where: Where;
}

export interface Overrides {
  readonly containers: ReadonlyMap<string, ContainerOverride>;
  readonly values?: Readonly<Record<string, unknown>>;
}

export function readOverrides(r: Reader, raw: unknown, file: string): Overrides | undefined {
  const root: Where = { file, line: r.loc.info(raw)?.line ?? 1, path: '' };
  if (raw === null || raw === undefined) return { containers: new Map() };
  const m = r.mapping(raw, root, OVERRIDE_KEYS);
  if (!m) return undefined;
  const before = r.problems.count;
  const containers = new Map<string, ContainerOverride>();
  if (m.containers !== undefined) {
    const cw = r.child(m, 'containers', root);
    const cm = r.mapping(m.containers, cw);
    for (const name of Object.keys(cm ?? {})) {
      const w = r.child(cm, name, cw);
      if (!CONTAINER_NAME.test(name)) {
        r.fail(w, `${JSON.stringify(name)} is not a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)`);
        continue;
      }
      const ov = r.mapping(cm?.[name], w);
      if (ov) containers.set(name, { raw: ov, where: w });
    }
  }
  let values: Record<string, unknown> | undefined;
  if (m.values !== undefined) values = r.data(m.values, r.child(m, 'values', root));
  if (r.problems.count !== before) return undefined;
  return { containers, ...(values ? { values } : {}) };
}

/** A new raw container mapping: `base` with `ov` applied; positions registered in the Locator. */
export function applyOverride(r: Reader, base: Mapping, baseWhere: Where, ov: ContainerOverride): Mapping {
  const merged: Mapping = {};
  const keys = new Map<string, KeyPos>();
  for (const [k, v] of Object.entries(base)) {
    merged[k] = v;
    keys.set(k, r.loc.keyPos(base, k, baseWhere));
  }
  for (const [k, v] of Object.entries(ov.raw)) {
    const pos = r.loc.keyPos(ov.raw, k, ov.where);
    if (v === null) {
      delete merged[k];
      keys.delete(k);
    } else if (
      MERGED_FIELDS.includes(k) &&
      isMapping(v) &&
      (merged[k] === undefined || isMapping(merged[k]))
    ) {
      const baseWhereK = merged[k] === undefined ? undefined : r.child(base, k, baseWhere);
      merged[k] = mergeMapping(r, merged[k] as Mapping | undefined, baseWhereK, v, {
        file: pos.file ?? ov.where.file,
        line: pos.line,
        path: pos.path ?? '',
      });
      keys.set(k, pos);
    } else {
      merged[k] = v;
      keys.set(k, pos);
    }
  }
  r.loc.register(merged, { file: baseWhere.file, line: baseWhere.line, keys });
  return merged;
}

/** Key-wise merge; a null value in `ov` deletes the key. */
function mergeMapping(
  r: Reader,
  base: Mapping | undefined,
  baseWhere: Where | undefined,
  ov: Mapping,
  ovWhere: Where,
): Mapping {
  const out: Mapping = {};
  const keys = new Map<string, KeyPos>();
  if (base && baseWhere) {
    for (const [k, v] of Object.entries(base)) {
      out[k] = v;
      keys.set(k, r.loc.keyPos(base, k, baseWhere));
    }
  }
  for (const [k, v] of Object.entries(ov)) {
    if (v === null) {
      delete out[k];
      keys.delete(k);
    } else {
      out[k] = v;
      keys.set(k, r.loc.keyPos(ov, k, ovWhere));
    }
  }
  r.loc.register(out, { file: ovWhere.file, line: ovWhere.line, keys });
  return out;
}
