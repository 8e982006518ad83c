/**
 * The route table: every route the API serves, in one place. Each entry's
 * handler comes with its doc (summary, parameters, body and answer schemas,
 * error codes); GET /v1/openapi.json is assembled from this table, so adding
 * a route here documents it (docs/reference/api.md, "Adding a route").
 */
import type { Route, RouteHandler } from '../context.js';
import { openApiDocument } from '../openapi/document.js';
import type { MetricsRegistry } from '../registry.js';
import { pattern, setPattern, type RouteDef } from '../router.js';
import * as a from './adopt.js';
import * as r from './reads.js';
import * as s from './streams.js';
import * as w from './writes.js';

type Def = RouteDef<RouteHandler>;

const get = (template: string, route: Route, match = pattern(template)): Def => ({
  method: 'GET',
  template,
  mutating: false,
  readOnlySocket: true,
  match,
  ...route,
});
/** A read the read-only socket refuses: container logs may carry what services print (tokens, URLs with passwords). */
const adminGet = (template: string, route: Route): Def => ({
  ...get(template, route),
  readOnlySocket: false,
});
const post = (template: string, route: Route, match = pattern(template)): Def => ({
  method: 'POST',
  template,
  mutating: true,
  readOnlySocket: false,
  match,
  ...route,
});

export function buildRoutes(metrics: MetricsRegistry): Def[] {
  const routes: Def[] = [
    get('/v1/status', r.status()),
    get('/v1/sets', r.sets),
    get('/v1/sets/{set}', r.set, setPattern(null)),
    post('/v1/sets/{set}/upgrade', w.upgradeSet, setPattern('upgrade')),
    get('/v1/containers/{name}', r.container),
    get('/v1/containers/{name}/health', r.health),
    get('/v1/containers/{name}/generations', r.generations),
    get('/v1/containers/{name}/generations/diff', r.generationDiff),
    adminGet('/v1/containers/{name}/logs', s.logs),
    post('/v1/containers/{name}/restart', w.containerAction('restart')),
    post('/v1/containers/{name}/stop', w.containerAction('stop')),
    post('/v1/containers/{name}/start', w.containerAction('start')),
    post('/v1/containers/{name}/upgrade', w.upgradeContainer),
    post('/v1/containers/{name}/rollback', w.rollbackContainer),
    post('/v1/containers/{name}/adopt', a.adoptContainer),
    post('/v1/containers/{name}/release', a.releaseContainer),
    adminGet('/v1/adopt/scan', a.adoptScan),
    post('/v1/reload', w.reload),
    get('/v1/plan', r.plan),
    get('/v1/events', s.events),
    get('/metrics', r.metrics(metrics)),
  ];
  routes.push(get('/v1/openapi.json', openApi(routes)));
  return routes;
}

const OPENAPI_DOCUMENT = {
  type: 'object',
  properties: {
    openapi: { const: '3.1.0' },
    info: { type: 'object' },
    paths: { type: 'object' },
    components: { type: 'object' },
  },
  required: ['openapi', 'info', 'paths', 'components'],
};

/** GET /v1/openapi.json: the document of `routes` (itself included), built at the first call. */
function openApi(routes: readonly Def[]): Route {
  let body: Buffer | null = null;
  return {
    doc: {
      summary: 'This document: the OpenAPI 3.1 description of every route',
      responses: [
        {
          status: 200,
          description: 'the OpenAPI document',
          schema: OPENAPI_DOCUMENT,
        },
      ],
      errors: [],
    },
    handler: async (ctx) => {
      body ??= Buffer.from(JSON.stringify(openApiDocument(routes, ctx.deps.version)));
      return {
        kind: 'bytes',
        status: 200,
        body,
        headers: { 'content-type': 'application/json; charset=utf-8' },
      };
    },
  };
}
