import { SpcdError, type ErrorCode } from '../errors.js';

const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ENOENT', 'ECONNRESET', 'EPIPE', 'EACCES', 'ENOTSOCK']);

interface DockerishError {
  statusCode?: number;
  code?: string;
  name?: string;
  json?: { message?: string } | null;
  message?: string;
}

/** Maps a dockerode/docker-modem/socket error to a typed SpcdError by status and errno, never by text. */
export function mapEngineError(err: unknown, what: string, timedOut = false): SpcdError {
  if (err instanceof SpcdError) return err;
  const e = (err ?? {}) as DockerishError;
  const engineMessage = e.json?.message ?? e.message ?? String(err);
  let code: ErrorCode;
  if (timedOut) code = 'ENGINE_TIMEOUT';
  else if (e.code && UNAVAILABLE_ERRNOS.has(e.code)) code = 'ENGINE_UNAVAILABLE';
  else if (e.statusCode === 404) code = 'ENGINE_NOT_FOUND';
  else if (e.statusCode === 409) code = 'ENGINE_CONFLICT';
  else if (e.name === 'AbortError') code = 'ENGINE_TIMEOUT';
  else code = 'ENGINE_FAILED';
  return new SpcdError(
    code,
    `${what}: ${timedOut ? 'deadline passed' : engineMessage}`,
    { statusCode: e.statusCode ?? null, errno: e.code ?? null },
    { cause: err },
  );
}

/**
 * Runs fn with an AbortSignal that fires at the deadline or when the caller's
 * signal aborts, and rejects at the deadline even if the engine never answers.
 */
export async function withDeadline<T>(
  what: string,
  ms: number,
  outer: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const ctl = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const onOuter = (): void => ctl.abort(outer?.reason);
  if (outer?.aborted) ctl.abort(outer.reason);
  else outer?.addEventListener('abort', onOuter, { once: true });
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      ctl.abort(new Error('deadline'));
      reject(mapEngineError(new Error('deadline'), what, true));
    }, ms);
  });
  try {
    return await Promise.race([fn(ctl.signal), deadline]);
  } catch (err) {
    throw mapEngineError(err, what, timedOut);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
  }
}
