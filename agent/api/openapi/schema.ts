/**
 * JSON Schema (2020-12, as OpenAPI 3.1 uses) as plain constants, and a few
 * builders that keep them short. Objects built with `obj` are closed
 * (`additionalProperties: false`): an answer with a field the document does
 * not name fails the contract test, so a new field cannot go undocumented.
 */

import { SpcdError } from '../../errors.js';

export type Schema = Readonly<Record<string, unknown>>;

/** A reference to a named schema under #/components/schemas. */
export function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

export const str = (description?: string): Schema =>
  description === undefined ? { type: 'string' } : { type: 'string', description };

export const int = (minimum?: number, description?: string): Schema => ({
  type: 'integer',
  ...(minimum === undefined ? {} : { minimum }),
  ...(description === undefined ? {} : { description }),
});

export const bool: Schema = { type: 'boolean' };

/** ISO 8601 time as the API writes it (Date#toISOString). */
export const isoTime: Schema = { type: 'string', format: 'date-time' };

export const nullable = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] });

export const arr = (items: Schema): Schema => ({ type: 'array', items });

export const oneOfStrings = (values: readonly string[], description?: string): Schema => ({
  type: 'string',
  enum: [...values],
  ...(description === undefined ? {} : { description }),
});

/** An open object: any fields (host facts, preflight, operation results). */
export const anyObject = (description?: string): Schema => ({
  type: 'object',
  ...(description === undefined ? {} : { description }),
});

/**
 * A closed object. Every property is required unless its name is listed in
 * `optional`.
 */
export function obj(
  properties: Readonly<Record<string, Schema>>,
  optional: readonly string[] = [],
  description?: string,
): Schema {
  for (const o of optional) {
    if (!(o in properties)) throw new SpcdError('INTERNAL', `schema: optional ${o} is not a property`);
  }
  return {
    type: 'object',
    ...(description === undefined ? {} : { description }),
    properties,
    required: Object.keys(properties).filter((k) => !optional.includes(k)),
    additionalProperties: false,
  };
}
