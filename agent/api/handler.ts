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
import { ApiMetrics, registerContainerMetrics } from './metrics.js';
import { registerProcessMetrics } from './process-metrics.js';
import { MetricsRegistry } from './registry.js';
import { createPeerCredLookup, type PeerCred, type PeerCredLookup } from './peer-cred.js';
import { matchRoute, splitPath, type RouteDef } from './router.js';
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

export interface ApiHandlers {
  /** Every route (the admin socket). */
  readonly admin: ApiHandler;
  /** GET and HEAD on the routes marked readOnlySocket; anything else answers READ_ONLY_SOCKET. */
  readonly readOnly: ApiHandler;
}

/** The admin socket's handler alone. */
export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  return createApiHandlers(deps).admin;
}

/** The read-only socket refuses any method but GET and HEAD, and the reads kept for the admin socket. */
function refuseOnReadOnly(method: string, route: RouteDef<RouteHandler> | null): void {
  if (method !== 'GET' && method !== 'HEAD') {
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
  const limits = compileLimits(deps.limits);
  const registry = deps.metrics ?? new MetricsRegistry();
  registerContainerMetrics(registry, deps.status);
  const metrics = new ApiMetrics(registry);
  registerProcessMetrics(registry);
  const routes = buildRoutes(registry);
  const log = deps.log.child({ room: 'api' });
  const apiDeps = { status: deps.status, actions: deps.actions, log, version: deps.version };
  const peerCred = deps.peerCred ?? createPeerCredLookup();

  /** One audit line per mutating request, and per request the read-only socket refused. */
  const auditLine = (fields: {
    tier: ApiTier;
    route: string;
    method: string;
    target: string | null;
    status: number;
    code: string | null;
    durationMs: number;
    operationId: string | null;
    peer: PeerCred | null;
  }): void => {
    const { peer, tier, ...rest } = fields;
    log.info(
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
  };

  const serve =
    (tier: ApiTier): ApiHandler =>
    (req, res) => {
      const started = process.hrtime.bigint();
      const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
      const method = req.method ?? 'GET';
      let template = 'unmatched';
      let observed = false;
      const observe = (status: number): void => {
        if (observed) return;
        observed = true;
        metrics.observe(template, method, status, seconds());
      };
      res.setHeader('x-spcd-version', deps.version);

      let matched: { route: RouteDef<RouteHandler>; params: Readonly<Record<string, string>> } | null = null;
      let query = new URLSearchParams();
      let path = req.url ?? '/';
      try {
        if (tier === 'read-only') refuseOnReadOnly(method, null);
        const url = new URL(req.url ?? '/', 'http://spcd.invalid');
        query = url.searchParams;
        path = url.pathname;
        matched = matchRoute(routes, method, splitPath(url.pathname));
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
        observe(e.status);
        if (e.code === 'READ_ONLY_SOCKET') {
          auditLine({
            tier,
            route: matched?.route.template ?? path,
            method,
            target: null,
            status: e.status,
            code: e.code,
            durationMs: Math.round(seconds() * 1e6) / 1e3,
            operationId: null,
            peer: peerCred(req.socket),
          });
        }
        return;
      }

      const { route, params } = matched;
      const audit: { target?: string; operationId?: string } = {};
      // the kernel's word on who connected (SO_PEERCRED): asked while the connection is surely open
      const peer = route.mutating ? peerCred(req.socket) : null;
      const ctx: RouteContext = {
        req,
        res,
        params,
        query,
        deps: apiDeps,
        limits,
        audit,
        streamStarted: (status) => observe(status),
      };

      const done = (status: number, code: string | null): void => {
        observe(status);
        if (!route.mutating) return;
        auditLine({
          tier,
          route: route.template,
          method,
          target: audit.target ?? null,
          status,
          code,
          durationMs: Math.round(seconds() * 1e6) / 1e3,
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
          const e = toApiError(err, log, { route: route.template, method });
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
    };

  return { admin: serve('admin'), readOnly: serve('read-only') };
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
