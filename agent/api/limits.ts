/** The API's limits. User-facing numbers are checked once here (options are compiled). */
import { SpcdError } from '../errors.js';

export interface ApiLimits {
  /** Largest request body accepted, in bytes; larger answers 413 and the connection is closed. */
  readonly bodyBytes: number;
  /** Time allowed to receive the request headers (node's server.headersTimeout). */
  readonly headersTimeoutMs: number;
  /** Time allowed to receive a whole request (node's server.requestTimeout); streamed responses are not cut by it. */
  readonly requestTimeoutMs: number;
  /**
   * Concurrent connections. At the cap a new connection takes the slot of the oldest one that is not
   * being served (still sending its request, or idle); when there is none it is closed (api/connections.ts).
   */
  readonly maxConnections: number;
  /** A new connection cannot be evicted for this long: time enough to send its request. */
  readonly connectionGraceMs: number;
  /** Deepest JSON nesting accepted in a request body. */
  readonly jsonDepth: number;
  /** Heartbeat period on /v1/events. */
  readonly heartbeatMs: number;
  /** Bytes an events client may fall behind before it is dropped (a logs client: 16 times this). */
  readonly streamBacklogBytes: number;
  /** Bytes all open streams together may hold unread; a new stream that could pass it answers 503. */
  readonly streamBudgetBytes: number;
}

export const DEFAULT_LIMITS: ApiLimits = {
  bodyBytes: 64 * 1024,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 30_000,
  maxConnections: 64,
  connectionGraceMs: 250,
  jsonDepth: 32,
  heartbeatMs: 15_000,
  streamBacklogBytes: 1024 * 1024,
  streamBudgetBytes: 64 * 1024 * 1024,
};

export function compileLimits(partial: Partial<ApiLimits> = {}): ApiLimits {
  const out = { ...DEFAULT_LIMITS, ...stripUndefined(partial) };
  for (const [key, value] of Object.entries(out)) {
    if (!Number.isInteger(value) || value <= 0) {
      throw new SpcdError('SETTINGS_INVALID', `API limit ${key} must be a positive integer`, { key, value });
    }
  }
  return out;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
