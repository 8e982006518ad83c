/** The route table: every route the API serves, in one place. */
import type { RouteHandler } from '../context.js';
import type { MetricsRegistry } from '../registry.js';
import { pattern, setPattern, type RouteDef } from '../router.js';
import * as r from './reads.js';
import { getEvents, getLogs } from './streams.js';
import * as w from './writes.js';

export function buildRoutes(metrics: MetricsRegistry): RouteDef<RouteHandler>[] {
  const get = (template: string, handler: RouteHandler): RouteDef<RouteHandler> => ({
    method: 'GET',
    template,
    mutating: false,
    match: pattern(template),
    handler,
  });
  const post = (template: string, handler: RouteHandler): RouteDef<RouteHandler> => ({
    method: 'POST',
    template,
    mutating: true,
    match: pattern(template),
    handler,
  });
  return [
    get('/v1/status', r.getStatus()),
    get('/v1/sets', r.getSets),
    {
      method: 'GET',
      template: '/v1/sets/{set}',
      mutating: false,
      match: setPattern(null),
      handler: r.getSet,
    },
    {
      method: 'POST',
      template: '/v1/sets/{set}/upgrade',
      mutating: true,
      match: setPattern('upgrade'),
      handler: w.upgradeSet,
    },
    get('/v1/containers/{name}', r.getContainer),
    get('/v1/containers/{name}/health', r.getHealth),
    get('/v1/containers/{name}/generations', r.getGenerations),
    get('/v1/containers/{name}/generations/diff', r.getGenerationDiff),
    get('/v1/containers/{name}/logs', getLogs),
    post('/v1/containers/{name}/restart', w.containerAction('restart')),
    post('/v1/containers/{name}/stop', w.containerAction('stop')),
    post('/v1/containers/{name}/start', w.containerAction('start')),
    post('/v1/containers/{name}/upgrade', w.upgradeContainer),
    post('/v1/containers/{name}/rollback', w.rollbackContainer),
    post('/v1/reload', w.reload),
    get('/v1/plan', r.getPlan),
    get('/v1/events', getEvents),
    get('/metrics', r.getMetrics(metrics)),
  ];
}
