/** Reading a JSON request body under a size cap and a nesting cap. */
import type { IncomingMessage } from 'node:http';
import { SpcdError } from '../errors.js';

/**
 * Resolves with the parsed body ({} when empty). Rejects with BODY_TOO_LARGE
 * as soon as the declared or received size passes the cap (reading stops;
 * the caller answers 413 and closes), BAD_REQUEST for bad JSON or a body that
 * is not an object, and BAD_REQUEST for nesting deeper than the cap.
 */
export function readJsonBody(
  req: IncomingMessage,
  limits: { bodyBytes: number; jsonDepth: number },
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limits.bodyBytes) {
      reject(tooLarge(limits.bodyBytes, Number(declared)));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: SpcdError | null, value?: Record<string, unknown>): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      if (err) reject(err);
      else resolve(value ?? {});
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limits.bodyBytes) {
        req.pause();
        finish(tooLarge(limits.bodyBytes, size));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      try {
        finish(null, parseJsonObject(Buffer.concat(chunks).toString('utf8'), limits.jsonDepth));
      } catch (err) {
        finish(err as SpcdError);
      }
    };
    const onError = (): void => finish(new SpcdError('BAD_REQUEST', 'request body could not be read'));
    const onAborted = (): void => finish(new SpcdError('BAD_REQUEST', 'request aborted by the client'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

function tooLarge(cap: number, size: number): SpcdError {
  return new SpcdError('BODY_TOO_LARGE', `request body is larger than ${cap} bytes`, {
    limit: cap,
    received: size,
  });
}

export function parseJsonObject(text: string, maxDepth: number): Record<string, unknown> {
  if (text.trim() === '') return {};
  const depth = jsonDepth(text);
  if (depth > maxDepth) {
    throw new SpcdError('BAD_REQUEST', `JSON nesting is deeper than ${maxDepth}`, { limit: maxDepth, depth });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SpcdError('BAD_REQUEST', `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SpcdError('BAD_REQUEST', 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Deepest bracket nesting outside strings; a linear scan done before JSON.parse. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped char
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) max = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}
