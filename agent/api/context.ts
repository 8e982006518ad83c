/** What a route handler gets, and what it gives back. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log.js';
import type { ApiLimits } from './limits.js';
import type { RouteDoc } from './openapi/document.js';
import type { Params } from './router.js';
import type { StreamBudget } from './stream-budget.js';
import type { Actions, StatusView } from './types.js';

export interface ApiDeps {
  readonly status: StatusView;
  readonly actions: Actions;
  readonly log: Logger;
  readonly version: string;
}

export interface RouteContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly params: Params;
  readonly query: URLSearchParams;
  readonly deps: ApiDeps;
  readonly limits: ApiLimits;
  /** What all open streams may hold together (one per handler). */
  readonly streams: StreamBudget;
  /** Filled by mutating routes for the audit line. */
  readonly audit: { target?: string; operationId?: string };
  /** A streaming route calls this once its headers are out (metrics time to the first byte). */
  readonly streamStarted: (status: number) => void;
}

export type RouteResult =
  | { readonly kind: 'json'; readonly status: number; readonly body: unknown }
  | { readonly kind: 'text'; readonly status: number; readonly contentType: string; readonly text: string }
  | {
      readonly kind: 'bytes';
      readonly status: number;
      readonly body: Buffer;
      readonly headers: Readonly<Record<string, string>>;
    }
  | { readonly kind: 'streamed' };

export type RouteHandler = (ctx: RouteContext) => Promise<RouteResult>;

/** A handler and what it declares about itself (the OpenAPI document is built from these). */
export interface Route {
  readonly doc: RouteDoc;
  readonly handler: RouteHandler;
}

export function json(status: number, body: unknown): RouteResult {
  return { kind: 'json', status, body };
}
