import { CONTAINER_FIELDS, FIELD_ROWS, type FieldDef } from '../model/container-fields.js';
import type { ContainerSpec } from '../model/spec.js';
import type { CheckLibrary } from './check.js';
import { CUSTOM_READERS, type FieldContext } from './custom-readers.js';
import { readPlain } from './fields.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

export { CAPABILITIES, CONTAINER_NAME } from './custom-readers.js';

/**
 * One container definition (after overrides were merged into it) ->
 * ContainerSpec, row by row of the field table (model/container-fields.ts),
 * then the checks that span fields.
 */

/** The YAML keys a container mapping may hold, in table order. */
export const CONTAINER_KEYS: readonly string[] = FIELD_ROWS.map(([, def]) => def.key);

export interface ContainerContext {
  readonly name: string;
  /** Full slash path of the owning set. */
  readonly set: string;
  /** Names of the other containers of the same set (for depends_on). */
  readonly siblings: ReadonlySet<string>;
  readonly library: CheckLibrary | undefined;
}

function readValue(r: Reader, def: FieldDef, v: unknown, w: Where, ctx: FieldContext): unknown {
  return def.value.kind === 'custom'
    ? CUSTOM_READERS[def.value.reader].read(r, v, w, ctx)
    : readPlain(r, def.value, v, w);
}

/** A fresh copy of a default, so no two specs share a list or mapping. */
function defaultOf(def: FieldDef): unknown {
  return def.default !== null && typeof def.default === 'object' ? structuredClone(def.default) : def.default;
}

function isEmpty(v: unknown): boolean {
  return Array.isArray(v)
    ? v.length === 0
    : v !== null && typeof v === 'object' && Object.keys(v).length === 0;
}

export function validateContainer(
  r: Reader,
  raw: unknown,
  where: Where,
  ctx: ContainerContext,
): ContainerSpec | undefined {
  const m = r.mapping(raw, where, CONTAINER_KEYS);
  if (!m) return undefined;
  const before = r.problems.count;
  const spec: Record<string, unknown> = { name: ctx.name, set: ctx.set };
  const fieldCtx: FieldContext = { ...ctx, spec: spec as Partial<ContainerSpec>, mountTargets: new Map() };
  for (const [field, def] of FIELD_ROWS) {
    const v = m[def.key];
    if (v === undefined) {
      if (def.required) r.fail(where, `${def.key} is required`);
      else if (def.default !== undefined) spec[field] = defaultOf(def);
      continue;
    }
    const value = readValue(r, def, v, r.child(m, def.key, where), fieldCtx);
    // a field without a default is absent when empty (permissions: [])
    if (value !== undefined && (def.default !== undefined || !isEmpty(value))) spec[field] = value;
    else if (value === undefined && def.default !== undefined) spec[field] = defaultOf(def);
  }
  const kolla = (spec.config as readonly unknown[]).length > 0 || spec.permissions !== undefined;
  if (r.problems.count === before && spec.command === undefined && kolla)
    r.fail(
      r.child(
        m,
        m.config !== undefined ? CONTAINER_FIELDS.config.key : CONTAINER_FIELDS.permissions.key,
        where,
      ),
      "needs command: the image's kolla_start runs config.json's command, which spcd writes from it",
    );
  if (r.problems.count !== before) return undefined;
  spec.source = `${where.file}:${where.line}`;
  return spec as unknown as ContainerSpec;
}
