/** The read routes: status, sets, containers, health, generations (and their diff), plan, metrics. */
import { SpcdError } from '../../errors.js';
import { json, type RouteContext, type RouteResult } from '../context.js';
import type { MetricsRegistry } from '../registry.js';
import { queryInt, unprocessable } from '../validate.js';

function param(ctx: RouteContext, key: string): string {
  return ctx.params[key] ?? '';
}

function notFound(kind: string, name: string): SpcdError {
  return new SpcdError('NOT_FOUND', `no ${kind} named ${name}`, { [kind]: name });
}

/**
 * GET /v1/status. With StatusView.revision() the serialized answer is reused
 * while the revision holds (200 containers are ~80 KiB of JSON), and a client
 * sending the ETag back gets 304.
 */
export function getStatus() {
  let cached: { revision: number; etag: string; body: Buffer } | null = null;
  return async (ctx: RouteContext): Promise<RouteResult> => {
    const view = ctx.deps.status;
    if (!view.revision) return json(200, await view.status());
    const revision = view.revision();
    if (!cached || cached.revision !== revision) {
      const doc = await view.status();
      const now = view.revision();
      const body = Buffer.from(JSON.stringify(doc));
      // cache only if nothing changed while the document was built
      if (now === revision) cached = { revision, etag: `"r${revision}"`, body };
      else return json(200, doc);
    }
    const headers = { etag: cached.etag, 'content-type': 'application/json; charset=utf-8' };
    if (ctx.req.headers['if-none-match'] === cached.etag) {
      return { kind: 'bytes', status: 304, body: Buffer.alloc(0), headers };
    }
    return { kind: 'bytes', status: 200, body: cached.body, headers };
  };
}

export async function getSets(ctx: RouteContext): Promise<RouteResult> {
  return json(200, { sets: ctx.deps.status.sets() });
}

export async function getSet(ctx: RouteContext): Promise<RouteResult> {
  const name = param(ctx, 'set');
  const set = ctx.deps.status.set(name);
  if (!set) throw notFound('set', name);
  return json(200, set);
}

export async function getContainer(ctx: RouteContext): Promise<RouteResult> {
  const name = param(ctx, 'name');
  const c = ctx.deps.status.container(name);
  if (!c) throw notFound('container', name);
  return json(200, c);
}

export async function getHealth(ctx: RouteContext): Promise<RouteResult> {
  const name = param(ctx, 'name');
  const h = ctx.deps.status.health(name);
  if (!h) throw notFound('container', name);
  return json(200, h);
}

export async function getGenerations(ctx: RouteContext): Promise<RouteResult> {
  const name = param(ctx, 'name');
  const g = ctx.deps.status.generations(name);
  if (!g) throw notFound('container', name);
  return json(200, { name, generations: g });
}

/** GET /v1/containers/{name}/generations/diff?from=A&to=B (both required). */
export async function getGenerationDiff(ctx: RouteContext): Promise<RouteResult> {
  const name = param(ctx, 'name');
  const from = queryInt(ctx.query, 'from', 0, 1, Number.MAX_SAFE_INTEGER);
  const to = queryInt(ctx.query, 'to', 0, 1, Number.MAX_SAFE_INTEGER);
  if (from === 0) throw unprocessable('from', 'is required: a generation number');
  if (to === 0) throw unprocessable('to', 'is required: a generation number');
  const view = ctx.deps.status;
  const diff = view.generationDiff ? await view.generationDiff(name, from, to) : undefined;
  if (!diff) throw notFound('container', name);
  return json(200, diff);
}

export async function getPlan(ctx: RouteContext): Promise<RouteResult> {
  return json(200, await ctx.deps.status.plan());
}

export function getMetrics(registry: MetricsRegistry) {
  return async (): Promise<RouteResult> => {
    const text = registry.render();
    return { kind: 'text', status: 200, contentType: 'text/plain; version=0.0.4; charset=utf-8', text };
  };
}
