/** The read routes: status, sets, containers, health, generations (and their diff), plan, metrics; each with its doc. */
import { SpcdError } from '../../errors.js';
import { json, type Route, type RouteContext, type RouteResult } from '../context.js';
import { arr, obj, ref, str } from '../openapi/schema.js';
import type { MetricsRegistry } from '../registry.js';
import { queryInt, unprocessable } from '../validate.js';

function param(ctx: RouteContext, key: string): string {
  return ctx.params[key] ?? '';
}

function notFound(kind: string, name: string): SpcdError {
  return new SpcdError('NOT_FOUND', `no ${kind} named ${name}`, { [kind]: name });
}

export const CONTAINER_PARAM = { name: 'the container name' } as const;
export const SET_PARAM = {
  set: 'the set path; it spans segments (/v1/sets/compute/neutron) or is escaped (compute%2Fneutron)',
} as const;

/**
 * GET /v1/status. With StatusView.revision() the serialized answer is reused
 * while the revision holds (200 containers are ~80 KiB of JSON), and a client
 * sending the ETag back gets 304.
 */
export function status(): Route {
  let cached: { revision: number; etag: string; body: Buffer } | null = null;
  const handler = async (ctx: RouteContext): Promise<RouteResult> => {
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
  return {
    handler,
    doc: {
      summary: 'The whole status: host, engine, definitions, the tree of sets and every container',
      responses: [
        {
          status: 200,
          description: 'the status document',
          schema: ref('StatusDocument'),
          headers: { etag: 'the status revision, when the daemon tracks one' },
        },
        { status: 304, description: 'If-None-Match named the current ETag' },
      ],
      errors: ['ENGINE_UNAVAILABLE'],
    },
  };
}

export const sets: Route = {
  doc: {
    summary: 'The tree of sets',
    responses: [
      { status: 200, description: 'every top-level set', schema: obj({ sets: arr(ref('SetStatus')) }) },
    ],
    errors: [],
  },
  handler: async (ctx) => json(200, { sets: ctx.deps.status.sets() }),
};

export const set: Route = {
  doc: {
    summary: 'One set, with its containers and inner sets',
    params: SET_PARAM,
    responses: [{ status: 200, description: 'the set', schema: ref('SetStatus') }],
    errors: ['NOT_FOUND'],
  },
  handler: async (ctx) => {
    const name = param(ctx, 'set');
    const found = ctx.deps.status.set(name);
    if (!found) throw notFound('set', name);
    return json(200, found);
  },
};

export const container: Route = {
  doc: {
    summary: 'One container',
    params: CONTAINER_PARAM,
    responses: [{ status: 200, description: 'the container', schema: ref('ContainerStatus') }],
    errors: ['NOT_FOUND'],
  },
  handler: async (ctx) => {
    const name = param(ctx, 'name');
    const c = ctx.deps.status.container(name);
    if (!c) throw notFound('container', name);
    return json(200, c);
  },
};

export const health: Route = {
  doc: {
    summary: "A container's health checks and their recent results",
    params: CONTAINER_PARAM,
    responses: [{ status: 200, description: 'the health view', schema: ref('ContainerHealthView') }],
    errors: ['NOT_FOUND'],
  },
  handler: async (ctx) => {
    const name = param(ctx, 'name');
    const h = ctx.deps.status.health(name);
    if (!h) throw notFound('container', name);
    return json(200, h);
  },
};

export const generations: Route = {
  doc: {
    summary: "A container's retained generations, newest first",
    params: CONTAINER_PARAM,
    responses: [
      {
        status: 200,
        description: 'the generations',
        schema: obj({ name: str(), generations: arr(ref('GenerationView')) }),
      },
    ],
    errors: ['NOT_FOUND'],
  },
  handler: async (ctx) => {
    const name = param(ctx, 'name');
    const g = ctx.deps.status.generations(name);
    if (!g) throw notFound('container', name);
    return json(200, { name, generations: g });
  },
};

const GENERATION_QUERY = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const;

/** GET /v1/containers/{name}/generations/diff?from=A&to=B (both required). */
export const generationDiff: Route = {
  doc: {
    summary: 'What changed from generation A to generation B: image, digest, spec fields, config files',
    params: CONTAINER_PARAM,
    query: {
      from: { schema: GENERATION_QUERY, description: 'the older generation (required)' },
      to: { schema: GENERATION_QUERY, description: 'the newer generation (required)' },
    },
    responses: [{ status: 200, description: 'the difference', schema: ref('GenerationDiffView') }],
    errors: ['NOT_FOUND', 'UNPROCESSABLE'],
  },
  handler: async (ctx) => {
    const name = param(ctx, 'name');
    const from = queryInt(ctx.query, 'from', 0, 1, Number.MAX_SAFE_INTEGER);
    const to = queryInt(ctx.query, 'to', 0, 1, Number.MAX_SAFE_INTEGER);
    if (from === 0) throw unprocessable('from', 'is required: a generation number');
    if (to === 0) throw unprocessable('to', 'is required: a generation number');
    const view = ctx.deps.status;
    const diff = view.generationDiff ? await view.generationDiff(name, from, to) : undefined;
    if (!diff) throw notFound('container', name);
    return json(200, diff);
  },
};

export const plan: Route = {
  doc: {
    summary: 'What a reload would change, and why',
    responses: [{ status: 200, description: 'the plan', schema: ref('PlanView') }],
    errors: ['ENGINE_UNAVAILABLE'],
  },
  handler: async (ctx) => json(200, await ctx.deps.status.plan()),
};

export function metrics(registry: MetricsRegistry): Route {
  return {
    doc: {
      summary: 'Every metric family, in the Prometheus text format 0.0.4 (docs/reference/metrics.md)',
      responses: [
        {
          status: 200,
          description: 'the exposition',
          contentType: 'text/plain; version=0.0.4',
          schema: { type: 'string' },
        },
      ],
      errors: [],
    },
    handler: async () => {
      const text = registry.render();
      return { kind: 'text', status: 200, contentType: 'text/plain; version=0.0.4; charset=utf-8', text };
    },
  };
}
