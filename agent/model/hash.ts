import { createHash } from 'node:crypto';
import { FIELD_ROWS, type FieldName } from './container-fields.js';
import type { ContainerSpec } from './spec.js';

/**
 * The spec hash decides whether a container must be recreated. It covers only
 * what the engine is asked to create, in normalized form (units converted,
 * lists sorted by spec/), so a reordered YAML key or "64m" vs 67108864 hashes
 * the same.
 *
 * Scheme v2 hashes the *pruned* form: a field that is absent or at its
 * default has no key at all, at any depth. So a container option added to spcd later
 * changes no hash of a definition that does not use it, and upgrading spcd
 * recreates nothing (docs/decisions/0007-hash-schemes.md). Containers labelled
 * by an older scheme are compared under that scheme (hash-schemes.ts).
 *
 * A change to the hashed form of an existing spec (a field moved into or out
 * of the hash, a default changed) needs a new scheme, with the old function
 * kept in hash-schemes.ts; test/unit/hash-schemes.test.ts freezes the values.
 */
export const HASH_SCHEME = 'v2';

/**
 * The config hash (render/renderer.ts) over the rendered files and kolla's
 * config.json. Its text must not change for a definition that does not use a
 * new option, or every container with config is recreated (golden test in
 * test/unit/hash-schemes.test.ts). 'none' when a container has no config.
 */
export const CONFIG_HASH_SCHEME = 'v1';
export const NO_CONFIG_HASH = 'none';

/**
 * Every ContainerSpec field, hashed or not: the field table's `hash` column
 * (model/container-fields.ts), plus the name. True when it changes what the
 * engine is asked to create (then it must be absent, false, empty or at a
 * default left out of the hash when a definition does not use it), false
 * when it does not (health checks, config files: the config hash covers those).
 */
export const SPEC_HASH_FIELDS: { readonly [K in keyof ContainerSpec]-?: boolean } = {
  name: true,
  set: false,
  ...(Object.fromEntries(FIELD_ROWS.map(([field, def]) => [field, def.hash !== false])) as {
    [K in FieldName]: boolean;
  }),
  source: false,
};

/**
 * Normalized defaults that are not already absent, false or empty: a field at
 * this value is left out of the hashed form (rows with hash 'unless-default').
 * Adding such a row for a *new* field changes no existing hash; changing one
 * does (a new scheme).
 */
export const HASH_DEFAULTS: { readonly [K in keyof ContainerSpec]?: unknown } = Object.fromEntries(
  FIELD_ROWS.filter(([, def]) => def.hash === 'unless-default').map(([field, def]) => [field, def.default]),
);

/**
 * The value with every object key whose value means "not used" removed, at
 * every depth (array elements are kept, in order): a nested option added
 * later (a new bind flag) is as neutral as a top-level one.
 */
export function pruneEmpty(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(pruneEmpty);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const pruned = pruneEmpty(inner);
    if (!isEmptyValue(pruned)) out[key] = pruned;
  }
  return out;
}

/** True for undefined, null, false, [] and {}: values that mean "not used". */
export function isEmptyValue(value: unknown): boolean {
  if (value === undefined || value === null || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

/**
 * The hashed form of scheme v2: hashed fields only, none absent or at its
 * default. `fields` is SPEC_HASH_FIELDS; tests pass a longer table to play a
 * spcd that knows one more option.
 */
export function engineFacingSpec(
  spec: ContainerSpec,
  fields: Readonly<Record<string, boolean>> = SPEC_HASH_FIELDS,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, hashed] of Object.entries(fields)) {
    if (!hashed) continue;
    const value = pruneEmpty(spec[key as keyof ContainerSpec]);
    if (isEmptyValue(value)) continue;
    const byDefault = HASH_DEFAULTS[key as keyof ContainerSpec];
    if (byDefault !== undefined && canonicalJson(value) === canonicalJson(byDefault)) continue;
    out[key] = value;
  }
  return out;
}

/** JSON with object keys sorted at every depth: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** `<scheme>-<32 hex>` of a hashed form. */
export function schemeHash(scheme: string, form: unknown): string {
  return `${scheme}-${sha256Hex(canonicalJson(form)).slice(0, 32)}`;
}

export function specHash(spec: ContainerSpec): string {
  return schemeHash(HASH_SCHEME, engineFacingSpec(spec));
}

/** The scheme a hash label was written under ("v1" of "v1-…"); '' when it has none. */
export function hashScheme(hash: string): string {
  const dash = hash.indexOf('-');
  return dash > 0 ? hash.slice(0, dash) : '';
}
