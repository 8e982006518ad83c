/** Field checks for request bodies and query strings; each failure names its field (UNPROCESSABLE). */
import { SpcdError } from '../errors.js';

export function unprocessable(field: string, message: string, value?: unknown): SpcdError {
  return new SpcdError(
    'UNPROCESSABLE',
    `${field}: ${message}`,
    value === undefined ? { field } : { field, value },
  );
}

export function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) {
      throw unprocessable(key, `unknown field (allowed: ${allowed.join(', ') || 'none'})`);
    }
  }
}

export function optionalGeneration(
  body: Record<string, unknown>,
  field: string,
  min: number,
): number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw unprocessable(field, `must be an integer >= ${min}`, v);
  }
  return v;
}

export function optionalBoolean(body: Record<string, unknown>, field: string): boolean | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw unprocessable(field, 'must be true or false', v);
  return v;
}

const IMAGE_REF = /^[A-Za-z0-9][A-Za-z0-9._\-/:@+]*$/;

export function imageRef(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0)
    throw unprocessable(field, 'must be a non-empty image reference');
  if (value.length > 512 || !IMAGE_REF.test(value))
    throw unprocessable(field, 'is not a valid image reference', value);
  return value;
}

export function optionalImages(
  body: Record<string, unknown>,
  field: string,
): Record<string, string> | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v))
    throw unprocessable(field, 'must be an object of container name -> image');
  const out: Record<string, string> = {};
  for (const [name, ref] of Object.entries(v as Record<string, unknown>)) {
    out[name] = imageRef(ref, `${field}.${name}`);
  }
  return out;
}

export function queryInt(
  params: URLSearchParams,
  field: string,
  dflt: number,
  min: number,
  max: number,
): number {
  const raw = params.get(field);
  if (raw === null || raw === '') return dflt;
  if (!/^\d+$/.test(raw)) throw unprocessable(field, `must be an integer between ${min} and ${max}`, raw);
  const n = Number(raw);
  if (n < min || n > max) throw unprocessable(field, `must be an integer between ${min} and ${max}`, raw);
  return n;
}

export function queryBool(params: URLSearchParams, field: string): boolean {
  const raw = params.get(field);
  if (raw === null || raw === '0' || raw === 'false') return false;
  if (raw === '' || raw === '1' || raw === 'true') return true;
  throw unprocessable(field, 'must be 0, 1, true or false', raw);
}
