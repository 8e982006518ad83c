/**
 * Query-string checks, and the error every bad field value answers (UNPROCESSABLE
 * naming the field). Request bodies are checked against their schema (openapi/check.ts).
 */
import { SpcdError } from '../errors.js';

export function unprocessable(field: string, message: string, value?: unknown): SpcdError {
  return new SpcdError(
    'UNPROCESSABLE',
    `${field}: ${message}`,
    value === undefined ? { field } : { field, value },
  );
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
