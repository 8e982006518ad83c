/**
 * Checks a request body against the route's own schema (the one the OpenAPI
 * document shows), so what is documented is what is enforced. It knows the
 * few keywords request bodies use: a closed object whose properties are
 * integers (minimum), booleans, strings (minLength, maxLength, pattern,
 * title naming the kind of value) or objects of such strings; a property
 * that may be null (`anyOf: [X, {type: null}]`) is absent when null. Each
 * failure is UNPROCESSABLE naming the field (agent/api/validate.ts).
 */
import { SpcdError } from '../../errors.js';
import { unprocessable } from '../validate.js';
import type { Schema } from './schema.js';

interface Shape {
  readonly type?: string;
  readonly title?: string;
  readonly minimum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | Schema;
  readonly anyOf?: readonly Schema[];
}

const patterns = new Map<string, RegExp>();
function regexp(source: string): RegExp {
  let re = patterns.get(source);
  if (!re) patterns.set(source, (re = new RegExp(source, 'u')));
  return re;
}

/** The schema without its `null` alternative, and whether null was allowed. */
function unwrapNull(s: Shape): { shape: Shape; nullable: boolean } {
  const alts = s.anyOf;
  if (!alts) return { shape: s, nullable: false };
  const rest = alts.filter((a) => (a as Shape).type !== 'null');
  if (rest.length !== 1 || rest.length === alts.length)
    throw new SpcdError('INTERNAL', 'request schema: anyOf is only for a nullable value');
  return { shape: rest[0] as Shape, nullable: true };
}

function checkValue(s: Shape, value: unknown, field: string): void {
  switch (s.type) {
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (s.minimum ?? -Infinity))
        throw unprocessable(field, `must be an integer >= ${s.minimum ?? Number.MIN_SAFE_INTEGER}`, value);
      return;
    case 'boolean':
      if (typeof value !== 'boolean') throw unprocessable(field, 'must be true or false', value);
      return;
    case 'string': {
      const what = s.title ?? 'string';
      if (typeof value !== 'string' || value.length < (s.minLength ?? 0))
        throw unprocessable(field, `must be a non-empty ${what}`);
      if (value.length > (s.maxLength ?? Infinity) || (s.pattern && !regexp(s.pattern).test(value)))
        throw unprocessable(field, `is not a valid ${what}`, value);
      return;
    }
    case 'object':
      if (value === null || typeof value !== 'object' || Array.isArray(value))
        throw unprocessable(field, `must be an object of ${s.title ?? 'fields'}`);
      checkFields(s, value as Record<string, unknown>, `${field}.`);
      return;
    default:
      throw new SpcdError('INTERNAL', `request schema: ${field} has no type this checker knows`);
  }
}

function checkFields(s: Shape, body: Record<string, unknown>, prefix: string): void {
  const props = s.properties ?? {};
  const extra = s.additionalProperties;
  for (const key of Object.keys(body)) {
    if (key in props) continue;
    if (typeof extra === 'object') continue;
    const allowed = Object.keys(props).join(', ') || 'none';
    throw unprocessable(prefix + key, `unknown field (allowed: ${allowed})`);
  }
  for (const key of s.required ?? []) {
    if (body[key] === undefined) throw unprocessable(prefix + key, 'is required');
  }
  for (const [key, value] of Object.entries(body)) {
    const prop = (props[key] ?? extra) as Shape;
    const { shape, nullable } = unwrapNull(prop);
    // a declared optional field sent as null is taken as absent
    if (value === null && key in props && (nullable || !(s.required ?? []).includes(key))) continue;
    checkValue(shape, value, prefix + key);
  }
}

/** Throws UNPROCESSABLE naming the first field that breaks `schema`. */
export function checkBody(schema: Schema, body: Record<string, unknown>): void {
  checkFields(schema as Shape, body, '');
}
