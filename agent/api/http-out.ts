/** Writing answers: JSON bodies and the one error shape `{code, message, details}`. */
import type { ServerResponse } from 'node:http';
import { ERRORS, SpcdError, type ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** The status an error answers with; an error reaching a caller is always a SpcdError. */
export function statusOf(code: ErrorCode): number {
  return ERRORS[code].status;
}

/**
 * Turns anything thrown into the error answer. A non-SpcdError is a bug: its
 * stack is logged and the caller sees only a generic INTERNAL message.
 */
export function toApiError(err: unknown, log: Logger, context: Record<string, unknown>): SpcdError {
  if (err instanceof SpcdError) return err;
  log.error({ err, ...context }, 'unexpected error in API handler');
  return new SpcdError('INTERNAL', 'internal error; see the spcd log', {});
}

export function sendError(res: ServerResponse, err: SpcdError, close = false): void {
  const headers: Record<string, string> = {};
  if (close) headers.connection = 'close';
  if (err.code === 'METHOD_NOT_ALLOWED' && Array.isArray(err.details.allow)) {
    headers.allow = (err.details.allow as string[]).join(', ');
  }
  sendJson(res, err.status, err.toJSON(), headers);
}
