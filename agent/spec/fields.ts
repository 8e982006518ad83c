import type { ValueKind } from '../model/container-fields.js';
import { MAX_DURATION_MS } from '../model/units.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/**
 * The plain value kinds of the field table (model/container-fields.ts): how
 * each is read (with a file:line problem on bad input) and how the JSON Schema
 * describes it. The two sit side by side so they cannot drift apart; what a
 * schema cannot say (a memory minimum written as "64m") only the reader checks.
 */

export type JsonSchema = { readonly [key: string]: unknown };
export type PlainKind = Exclude<ValueKind, { kind: 'custom' }>;

export function readPlain(r: Reader, kind: PlainKind, v: unknown, w: Where): unknown {
  switch (kind.kind) {
    case 'boolean':
      return r.boolean(v, w);
    case 'integer':
      return r.integer(v, w, kind.min, kind.max);
    case 'size':
      return r.size(v, w, kind.min);
    case 'duration':
      return r.duration(v, w, kind.min);
    case 'string':
      return r.string(v, w, { pattern: kind.pattern, what: kind.what });
    case 'absPath':
      return r.absPath(v, w);
    case 'oneOf':
      return r.oneOf(v, w, kind.values);
    case 'strings':
      return r.strings(v, w, { nonEmpty: kind.nonEmpty ?? false });
    case 'textMap': {
      const prefix = kind.reservedPrefix;
      return r.textMap(v, w, {
        pattern: kind.keyPattern,
        what: kind.what,
        ...(kind.lineSafe ? { lineSafe: true } : {}),
        ...(prefix !== undefined
          ? {
              check: (k: string) =>
                k.toLowerCase().startsWith(prefix)
                  ? `label keys starting with "${prefix}" are reserved for spcd`
                  : undefined,
            }
          : {}),
      });
    }
  }
}

/** A size as parseSize reads it: bytes, or a number with b, k, kb, m, mb, g, gb (any case). */
export const SIZE_SCHEMA: JsonSchema = {
  oneOf: [
    { type: 'integer', minimum: 0 },
    { type: 'string', pattern: '^\\s*[0-9]+(?:\\.[0-9]+)?\\s*(?:[bB]|[kKmMgG][bB]?)?\\s*$' },
  ],
};

/** A duration as parseDuration reads it: milliseconds, or a number with ms, s, m, h. */
export const DURATION_STRING: JsonSchema = {
  type: 'string',
  pattern: '^\\s*[0-9]+(?:\\.[0-9]+)?\\s*(?:ms|s|m|h)?\\s*$',
};
export const DURATION_SCHEMA: JsonSchema = {
  oneOf: [{ type: 'integer', minimum: 0, maximum: MAX_DURATION_MS }, DURATION_STRING],
};

/** A path as Reader.absPath takes it (the schema cannot refuse "." and ".." segments). */
export const ABS_PATH_SCHEMA: JsonSchema = { type: 'string', pattern: '^/[^:\\s\\u0000]*$' };

export const STRINGS_SCHEMA: JsonSchema = { type: 'array', items: { type: 'string' } };

/** A value Reader.scalarText takes; LINE_SAFE_SCALAR without NUL, CR or LF in a string. */
export const SCALAR: JsonSchema = { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }] };
export const LINE_SAFE_SCALAR: JsonSchema = {
  oneOf: [{ type: 'string', pattern: '^[^\\u0000\\r\\n]*$' }, { type: 'number' }, { type: 'boolean' }],
};

/** Letters as [xX] classes: JSON Schema patterns have no case-insensitive flag. */
export function anyCase(text: string): string {
  return text.replace(/[a-zA-Z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`).replace(/\./g, '\\.');
}

export function plainSchema(kind: PlainKind): JsonSchema {
  switch (kind.kind) {
    case 'boolean':
      return { type: 'boolean' };
    case 'integer':
      return { type: 'integer', minimum: kind.min, maximum: kind.max };
    case 'size':
      return SIZE_SCHEMA;
    case 'duration':
      return DURATION_SCHEMA;
    case 'string':
      return { type: 'string', minLength: 1, pattern: kind.pattern.source };
    case 'absPath':
      return ABS_PATH_SCHEMA;
    case 'oneOf':
      return { enum: [...kind.values] };
    case 'strings':
      return kind.nonEmpty ? { ...STRINGS_SCHEMA, minItems: 1 } : STRINGS_SCHEMA;
    case 'textMap': {
      const names: JsonSchema = { pattern: kind.keyPattern.source };
      return {
        type: 'object',
        propertyNames:
          kind.reservedPrefix === undefined
            ? names
            : { ...names, not: { pattern: `^${anyCase(kind.reservedPrefix)}` } },
        additionalProperties: kind.lineSafe ? LINE_SAFE_SCALAR : SCALAR,
      };
    }
  }
}

/** Builders for the schemas of custom values (custom-readers.ts, check-schema.ts). */
export const object = (
  properties: Record<string, JsonSchema>,
  keys: readonly string[],
  required: readonly string[] = [],
): JsonSchema => {
  const missing = keys.filter((k) => !(k in properties));
  if (missing.length > 0 || Object.keys(properties).length !== keys.length)
    throw new Error(
      `schema properties ${Object.keys(properties).join(',')} do not match keys ${keys.join(',')}`,
    );
  return {
    type: 'object',
    additionalProperties: false,
    properties,
    ...(required.length > 0 ? { required: [...required] } : {}),
  };
};
export const str = (pattern: RegExp): JsonSchema => ({
  type: 'string',
  minLength: 1,
  pattern: pattern.source,
});
export const nonEmptyStrings: JsonSchema = { ...STRINGS_SCHEMA, minItems: 1 };
export const list = (items: JsonSchema): JsonSchema => ({ type: 'array', items });
export const ints = (min: number, max: number): JsonSchema =>
  list({ type: 'integer', minimum: min, maximum: max });
