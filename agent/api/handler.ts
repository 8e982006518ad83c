/**
 * The API as a plain (req, res) handler, built without listening so tests
 * inject requests; agent/api/socket.ts listens on the unix socket.
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
import { lookupPeerUid, type PeerUidLookup } from './peer-cred.js';
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
  /** How the audit line learns the caller's uid; defaults to the /proc + ss lookup. */
  readonly peerUid?: PeerUidLookup;
  /**
   * The one registry /metrics renders; the daemon passes the one its own
   * families are in. The handler adds the API's, the containers' and the
   * process's families to it (once: a second handler needs its own).
   */
  readonly metrics?: MetricsRegistry;
}

export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  const limits = compileLimits(deps.limits);
  const streams = new StreamBudget(limits.streamBudgetBytes);
  const registry = deps.metrics ?? new MetricsRegistry();
  registerContainerMetrics(registry, deps.status);
  const metrics = new ApiMetrics(registry);
  registerProcessMetrics(registry);
  const routes = buildRoutes(registry);
  const log = deps.log.child({ room: 'api' });
  const apiDeps = { status: deps.status, actions: deps.actions, log, version: deps.version };
  const peerUid = deps.peerUid ?? lookupPeerUid;

  return (req, res) => {
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
    try {
      const url = new URL(req.url ?? '/', 'http://spcd.invalid');
      query = url.searchParams;
      matched = matchRoute(routes, method, splitPath(url.pathname));
      template = `${matched.route.method} ${matched.route.template}`;
    } catch (err) {
      const e = err instanceof SpcdError ? err : new SpcdError('BAD_REQUEST', 'malformed request target');
      // The body of an unmatched request is not read: close so it cannot be taken for the next request.
      sendError(
        res,
        e,
        req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined,
      );
      observe(e.status);
      return;
    }

    const { route, params } = matched;
    const audit: { target?: string; operationId?: string } = {};
    // the caller's uid (for the audit line) costs a process spawn: asked only once the whole request
    // arrived, so a client that trickles or never finishes its body cannot make spcd spawn for it
    let uid: Promise<number | null> | null = null;
    if (route.mutating) {
      const lookup = (): void => {
        uid ??= peerUid(req.socket).catch(() => null);
      };
      if (req.complete) lookup();
      else req.once('end', lookup);
    }
    const ctx: RouteContext = {
      req,
      res,
      params,
      query,
      deps: apiDeps,
      limits,
      streams,
      audit,
      streamStarted: (status) => observe(status),
    };

    const done = (status: number, code: string | null): void => {
      observe(status);
      if (!route.mutating) return;
      void (uid ?? Promise.resolve(null)).then((callerUid) => {
        log.info(
          {
            audit: true,
            route: route.template,
            method,
            target: audit.target ?? null,
            status,
            code,
            durationMs: Math.round(seconds() * 1e6) / 1e3,
            operationId: audit.operationId ?? null,
            uid: callerUid,
          },
          `${method} ${route.template} -> ${status}${code ? ' ' + code : ''}`,
        );
      });
    };

    route.handler(ctx).then(
      (result: RouteResult) => {
        if (result.kind === 'streamed') return;
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
}
