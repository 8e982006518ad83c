/**
 * The OpenAPI 3.1 document of the socket API, assembled from the route table
 * (agent/api/routes/table.ts): each route carries its RouteDoc next to its
 * handler, so the document cannot name a route the router lacks or miss one
 * it has. Served at GET /v1/openapi.json; test/unit/api-openapi.test.ts and
 * the recorder in test/support/api-contract.ts keep it true.
 */
import { ERRORS, SpcdError, type ErrorCode } from '../../errors.js';
import { componentSchemas } from './components.js';
import { ref, type Schema } from './schema.js';

export interface ResponseDoc {
  readonly status: number;
  readonly description: string;
  /** The body's schema (JSON unless contentType says otherwise); none for an empty body. */
  readonly schema?: Schema;
  readonly contentType?: string;
  /** Header name -> what it carries. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface QueryDoc {
  readonly schema: Schema;
  readonly description: string;
}

/** What a route declares about itself, next to its handler. */
export interface RouteDoc {
  readonly summary: string;
  readonly description?: string;
  /** One line per path parameter of the template. */
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, QueryDoc>>;
  /** The JSON request body (a closed object); the handler checks bodies against it (check.ts). */
  readonly body?: Schema;
  readonly responses: readonly ResponseDoc[];
  /** The catalogue codes this route answers besides those every route may (ALWAYS, WITH_BODY). */
  readonly errors: readonly ErrorCode[];
}

export interface DocumentedRoute {
  readonly method: 'GET' | 'POST';
  readonly template: string;
  readonly mutating: boolean;
  readonly readOnlySocket: boolean;
  readonly doc: RouteDoc;
}

/** Any route may answer these: a malformed path escape, a bug. */
export const ALWAYS: readonly ErrorCode[] = ['BAD_REQUEST', 'INTERNAL'];
/** A route that reads a body may also answer these. */
export const WITH_BODY: readonly ErrorCode[] = ['BODY_TOO_LARGE', 'UNPROCESSABLE'];
/**
 * Answers node's HTTP server gives before any route runs (headers or request
 * timeout, headers too large), in the error shape with code BAD_REQUEST.
 */
export const CONNECTION_STATUSES: readonly number[] = [408, 431];

/** The error codes a route may answer, in catalogue order (a route the read-only socket refuses: READ_ONLY_SOCKET there). */
export function routeErrors(doc: RouteDoc, readOnlySocket = true): ErrorCode[] {
  const codes = new Set<ErrorCode>([
    ...ALWAYS,
    ...doc.errors,
    ...(doc.body ? WITH_BODY : []),
    ...(readOnlySocket ? [] : (['READ_ONLY_SOCKET'] as const)),
  ]);
  return (Object.keys(ERRORS) as ErrorCode[]).filter((c) => codes.has(c));
}

/** "POST /v1/containers/{name}/restart" -> "postContainersNameRestart". */
export function operationId(method: string, template: string): string {
  const words = template
    .split('/')
    .filter((s) => s !== '' && s !== 'v1')
    .map((s) => s.replace(/[{}]/g, '').replace(/\.json$/, ''))
    .flatMap((s) => s.split(/[^A-Za-z0-9]/))
    .filter((s) => s !== '');
  return method.toLowerCase() + words.map((w) => w[0]?.toUpperCase() + w.slice(1)).join('');
}

function content(type: string, schema: Schema): Record<string, unknown> {
  return { [type]: { schema } };
}

function operation(route: DocumentedRoute): Record<string, unknown> {
  const { doc, template, method } = route;
  const names = [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string);
  const parameters: unknown[] = names.map((name) => {
    const description = doc.params?.[name];
    if (description === undefined)
      throw new SpcdError('INTERNAL', `${method} ${template}: path parameter {${name}} has no description`);
    return { name, in: 'path', required: true, description, schema: { type: 'string', minLength: 1 } };
  });
  for (const p of Object.keys(doc.params ?? {}))
    if (!names.includes(p))
      throw new SpcdError('INTERNAL', `${method} ${template}: documents a parameter {${p}} it does not have`);
  for (const [name, q] of Object.entries(doc.query ?? {}))
    parameters.push({ name, in: 'query', required: false, description: q.description, schema: q.schema });

  const responses: Record<string, unknown> = {};
  for (const r of doc.responses) {
    const headers = Object.fromEntries(
      Object.entries(r.headers ?? {}).map(([h, description]) => [
        h,
        { description, schema: { type: 'string' } },
      ]),
    );
    responses[String(r.status)] = {
      description: r.description,
      ...(r.headers ? { headers } : {}),
      ...(r.schema ? { content: content(r.contentType ?? 'application/json', r.schema) } : {}),
    };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of routeErrors(doc, route.readOnlySocket)) {
    const s = ERRORS[code].status;
    byStatus.set(s, [...(byStatus.get(s) ?? []), code]);
  }
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    if (responses[String(status)])
      throw new SpcdError('INTERNAL', `${method} ${template}: ${status} is both an answer and an error`);
    responses[String(status)] = {
      description: codes.map((c) => `${c}: ${ERRORS[c].summary}`).join('\n'),
      content: content('application/json', {
        allOf: [ref('Error'), { type: 'object', properties: { code: { enum: codes } } }],
      }),
    };
  }
  return {
    operationId: operationId(method, template),
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(doc.body
      ? {
          requestBody: {
            required: Array.isArray(doc.body.required) && doc.body.required.length > 0,
            description: 'JSON; an empty body is taken as {}',
            content: content('application/json', doc.body),
          },
        }
      : {}),
    responses,
    ...(route.mutating ? { 'x-spcd-audited': true } : {}),
    ...(route.readOnlySocket ? {} : { 'x-spcd-admin-socket-only': true }),
  };
}

/** The whole document; `version` is spcd's. */
export function openApiDocument(
  routes: readonly DocumentedRoute[],
  version: string,
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const item = (paths[route.template] ??= {});
    const key = route.method.toLowerCase();
    if (item[key]) throw new SpcdError('INTERNAL', `${route.method} ${route.template} is in the table twice`);
    item[key] = operation(route);
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'spcd socket API',
      version,
      description:
        'HTTP/1.1 with JSON on the unix socket (default /run/spcd/spcd.sock); see docs/reference/api.md. ' +
        "Every error answers the Error shape with a code of the catalogue (docs/reference/errors.md) and that code's " +
        `status. Before any route runs, node's HTTP server may answer ${CONNECTION_STATUSES.join(' or ')} ` +
        '(a request or headers timeout, headers too large) in the same shape with code BAD_REQUEST. ' +
        'An unknown path answers 404 NOT_FOUND, a known path with another method 405 METHOD_NOT_ALLOWED.',
    },
    servers: [{ url: 'http://localhost', description: 'over the unix socket (curl --unix-socket PATH)' }],
    paths,
    components: {
      schemas: componentSchemas(),
      responses: {
        NotFound: {
          description: 'NOT_FOUND: no such route',
          content: content('application/json', ref('Error')),
        },
        MethodNotAllowed: {
          description: 'METHOD_NOT_ALLOWED: the path takes other methods (Allow header, details.allow)',
          content: content('application/json', ref('Error')),
        },
      },
    },
  };
}
