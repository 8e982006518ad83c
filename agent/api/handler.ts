/**
 * The API as plain (req, res) handlers, built without listening so tests
 * inject requests; agent/api/socket.ts listens on the unix sockets. One
 * handler per socket tier: the admin socket serves every route, the
 * read-only socket only the reads (decision 0041).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { RouteContext, RouteHandler, RouteResult } from './context.js';
import { sendError, sendJson, toApiError } from './http-out.js';
import { compileLimits, type ApiLimits } from './limits.js';
import { StreamBudget } from './stream-budget.js';
import { ApiMetrics, registerContainerMetrics } from './metrics.js';
import { registerProcessMetrics } from './process-metrics.js';
import { MetricsRegistry } from './registry.js';
import { createPeerCredLookup, type PeerCred, type PeerCredLookup } from './peer-cred.js';
import { matchRoute, splitPath, type Matched, type RouteDef } from './router.js';
import { buildRoutes } from './routes/table.js';
import type { Actions, StatusView } from './types.js';

export type ApiHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ApiHandlerDeps {
  readonly status: StatusView;
  readonly actions: Actions;
  readonly log: Logger;
  readonly version: string;
  readonly limits?: Partial<ApiLimits>;
  /** How the audit line learns the caller's uid, gid and pid; defaults to SO_PEERCRED. */
  readonly peerCred?: PeerCredLookup;
  /**
   * The one registry /metrics renders; the daemon passes the one its own
   * families are in. The handler adds the API's, the containers' and the
   * process's families to it (once: a second handler needs its own).
   */
  readonly metrics?: MetricsRegistry;
}

/** Which socket a request came in on: the admin socket, or the read-only one. */
export type ApiTier = 'admin' | 'read-only';

/** One request while it is answered: its socket, method, clock and metric. */
interface Exchange {
  readonly tier: ApiTier;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  /** Milliseconds since the request arrived, to the microsecond. */
  readonly ms: () => number;
  /** Records the request's metric, once. */
  readonly observe: (status: number) => void;
}

export interface ApiHandlers {
  /** Every route (the admin socket). */
  readonly admin: ApiHandler;
  /** GET on the routes marked readOnlySocket; anything else answers READ_ONLY_SOCKET. */
  readonly readOnly: ApiHandler;
}

/** The admin socket's handler alone. */
export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  return createApiHandlers(deps).admin;
}

/** The read-only socket refuses any method but GET, and the reads kept for the admin socket. */
function refuseOnReadOnly(method: string, route: RouteDef<RouteHandler> | null): void {
  if (method !== 'GET') {
    throw new SpcdError(
      'READ_ONLY_SOCKET',
      `${method} is refused on the read-only socket: use the admin socket`,
      {
        method,
      },
    );
  }
  if (route && !route.readOnlySocket) {
    throw new SpcdError('READ_ONLY_SOCKET', `${route.template} is served on the admin socket only`, {
      route: route.template,
    });
  }
}

export function createApiHandlers(deps: ApiHandlerDeps): ApiHandlers {
  const api = new Api(deps);
  return {
    admin: (req, res) => api.serve('admin', req, res),
    readOnly: (req, res) => api.serve('read-only', req, res),
  };
}

/** What both handlers share: the routes, the metrics, the audit. */
class Api {
  private readonly limits: ApiLimits;
  /** What every open stream of both sockets may hold together. */
  private readonly streams: StreamBudget;
  private readonly metrics: ApiMetrics;
  private readonly routes: RouteDef<RouteHandler>[];
  private readonly log: Logger;
  private readonly apiDeps: RouteContext['deps'];
  private readonly peerCred: PeerCredLookup;
  private readonly version: string;

  constructor(deps: ApiHandlerDeps) {
    this.limits = compileLimits(deps.limits);
    this.streams = new StreamBudget(this.limits.streamBudgetBytes);
    const registry = deps.metrics ?? new MetricsRegistry();
    registerContainerMetrics(registry, deps.status);
    this.metrics = new ApiMetrics(registry);
    registerProcessMetrics(registry);
    this.routes = buildRoutes(registry);
    this.log = deps.log.child({ room: 'api' });
    this.apiDeps = { status: deps.status, actions: deps.actions, log: this.log, version: deps.version };
    this.peerCred = deps.peerCred ?? createPeerCredLookup();
    this.version = deps.version;
  }

  serve(tier: ApiTier, req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
    const method = req.method ?? 'GET';
    let template = 'unmatched';
    let observed = false;
    const x: Exchange = {
      tier,
      req,
      res,
      method,
      ms: () => Math.round(seconds() * 1e6) / 1e3,
      observe: (status) => {
        if (observed) return;
        observed = true;
        this.metrics.observe(template, method, status, seconds());
      },
    };
    res.setHeader('x-spcd-version', this.version);

    let matched: Matched<RouteHandler> | null = null;
    let query = new URLSearchParams();
    let path = req.url ?? '/';
    try {
      if (tier === 'read-only') refuseOnReadOnly(method, null);
      const url = new URL(req.url ?? '/', 'http://spcd.invalid');
      path = url.pathname;
      query = url.searchParams;
      matched = matchRoute(this.routes, method, splitPath(url.pathname));
      template = `${matched.route.method} ${matched.route.template}`;
      if (tier === 'read-only') refuseOnReadOnly(method, matched.route);
    } catch (err) {
      const e = err instanceof SpcdError ? err : new SpcdError('BAD_REQUEST', 'malformed request target');
      // The body of an unmatched request is not read: close so it cannot be taken for the next request.
      sendError(
        res,
        e,
        req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined,
      );
      x.observe(e.status);
      if (e.code === 'READ_ONLY_SOCKET') {
        this.auditLine({
          tier,
          route: matched?.route.template ?? path,
          method,
          target: null,
          status: e.status,
          code: e.code,
          durationMs: x.ms(),
          operationId: null,
          peer: this.peerCred(req.socket),
        });
      }
      return;
    }
    this.runRoute(x, matched, query);
  }

  /** One audit line per mutating request, and per request the read-only socket refused. */
  private auditLine(fields: {
    tier: ApiTier;
    route: string;
    method: string;
    target: string | null;
    status: number;
    code: string | null;
    durationMs: number;
    operationId: string | null;
    peer: PeerCred | null;
  }): void {
    const { peer, tier, ...rest } = fields;
    this.log.info(
      {
        audit: true,
        ...rest,
        socket: tier,
        uid: peer?.uid ?? null,
        gid: peer?.gid ?? null,
        pid: peer?.pid ?? null,
      },
      `${fields.method} ${fields.route} -> ${fields.status}${fields.code ? ' ' + fields.code : ''}`,
    );
  }

  /** Runs a matched route: its answer, its metric, and for a write its audit line. */
  private runRoute(x: Exchange, matched: Matched<RouteHandler>, query: URLSearchParams): void {
    const { req, res } = x;
    const { route, params } = matched;
    const audit: { target?: string; operationId?: string } = {};
    // the kernel's word on who connected (SO_PEERCRED): asked while the connection is surely open
    const peer = route.mutating ? this.peerCred(req.socket) : null;
    const ctx: RouteContext = {
      req,
      res,
      params,
      query,
      deps: this.apiDeps,
      limits: this.limits,
      streams: this.streams,
      audit,
      streamStarted: (status) => x.observe(status),
    };

    const done = (status: number, code: string | null): void => {
      x.observe(status);
      if (!route.mutating) return;
      this.auditLine({
        tier: x.tier,
        route: route.template,
        method: x.method,
        target: audit.target ?? null,
        status,
        code,
        durationMs: x.ms(),
        operationId: audit.operationId ?? null,
        peer,
      });
    };

    route.handler(ctx).then(
      (result: RouteResult) => {
        if (result.kind === 'streamed') return;
        sendResult(res, result);
        done(result.status, null);
      },
      (err: unknown) => {
        const e = toApiError(err, this.log, { route: route.template, method: x.method });
        if (res.headersSent) {
          // a stream that failed after its headers: nothing sane left to send
          res.destroy();
        } else {
          // an unread or partly read body must not be parsed as the next request
          sendError(res, e, e.code === 'BODY_TOO_LARGE' || !req.complete);
        }
        done(e.status, e.code);
      },
    );
  }
}

/** Writes a route's answer that was not streamed. */
function sendResult(res: ServerResponse, result: Exclude<RouteResult, { kind: 'streamed' }>): void {
  if (result.kind === 'json') sendJson(res, result.status, result.body);
  else if (result.kind === 'bytes') {
    res.writeHead(result.status, {
      ...result.headers,
      ...(result.status === 304 ? {} : { 'content-length': String(result.body.length) }),
      'cache-control': 'no-store',
    });
    res.end(result.body);
  } else {
    res.writeHead(result.status, {
      'content-type': result.contentType,
      'content-length': Buffer.byteLength(result.text),
      'cache-control': 'no-store',
    });
    res.end(result.text);
  }
}
