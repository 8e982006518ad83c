/**
 * The recorder: every answer a test client receives from spcd's API (fakes
 * or a real daemon) is checked against the OpenAPI document built from the
 * route table, with ajv (JSON Schema 2020-12). A mismatch throws, which fails
 * the test that made the call. Coverage (which route answered which status)
 * is kept so a test can insist every route was exercised.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiDocument, CONNECTION_STATUSES } from '../../agent/api/openapi/document.js';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { matchRoute, splitPath, type RouteDef } from '../../agent/api/router.js';
import { buildRoutes } from '../../agent/api/routes/table.js';
import type { RouteHandler } from '../../agent/api/context.js';
import { ERRORS, isSpcdError } from '../../agent/errors.js';

export interface Exchange {
  readonly method: string;
  /** The request target: path and query. */
  readonly path: string;
  /** The request body sent, if any. */
  readonly requestBody?: string | undefined;
  readonly status: number;
  readonly contentType?: string | undefined;
  readonly text: string;
}

type Json = Record<string, unknown>;
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
const DOC_ID = 'spcd-openapi.json';

const pointer = (...parts: string[]): string =>
  parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

export class ApiContract {
  readonly routes: readonly RouteDef<RouteHandler>[];
  readonly document: Json;
  /** "GET /v1/status 200" for every answer checked. */
  readonly seen = new Set<string>();
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor() {
    this.routes = buildRoutes(new MetricsRegistry());
    this.document = openApiDocument(this.routes, 'contract');
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    this.ajv.addFormat('date-time', ISO_TIME);
    // the document's own keywords are not JSON Schema: ajv must not take them for typos
    this.ajv.addVocabulary(['openapi', 'jsonSchemaDialect', 'info', 'servers', 'paths', 'components']);
    this.ajv.addSchema(this.document, DOC_ID);
  }

  /** The validator of the schema at a JSON pointer inside the document. */
  schemaAt(ptr: string): ValidateFunction {
    let v = this.compiled.get(ptr);
    if (!v) {
      const found = this.ajv.getSchema(`${DOC_ID}#/${ptr}`);
      if (!found) throw new Error(`contract: no schema at #/${ptr}`);
      v = found;
      this.compiled.set(ptr, v);
    }
    return v;
  }

  private validate(ptr: string, value: unknown, what: string): void {
    const v = this.schemaAt(ptr);
    if (!v(value)) {
      const errors = (v.errors ?? [])
        .map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`)
        .slice(0, 8);
      throw new Error(`contract: ${what} does not match #/${ptr}: ${errors.join('; ')}`);
    }
  }

  private error(ex: Exchange, what: string): Json {
    let body: unknown;
    try {
      body = JSON.parse(ex.text);
    } catch {
      throw new Error(
        `contract: ${what} answered ${ex.status} without a JSON error: ${ex.text.slice(0, 200)}`,
      );
    }
    this.validate(pointer('components', 'schemas', 'Error'), body, `${what} (${ex.status})`);
    const code = (body as { code: keyof typeof ERRORS }).code;
    if (!CONNECTION_STATUSES.includes(ex.status) && ERRORS[code].status !== ex.status)
      throw new Error(
        `contract: ${what} answered ${code} with ${ex.status}, the catalogue says ${ERRORS[code].status}`,
      );
    return body as Json;
  }

  /** Throws when the answer breaks the document. */
  check(ex: Exchange): void {
    const what = `${ex.method} ${ex.path}`;
    if (CONNECTION_STATUSES.includes(ex.status)) {
      const body = this.error(ex, what);
      if (body.code !== 'BAD_REQUEST') throw new Error(`contract: ${what}: a ${ex.status} is BAD_REQUEST`);
      this.seen.add(`connection ${ex.status}`);
      return;
    }
    const url = new URL(ex.path, 'http://spcd.invalid');
    let route: RouteDef<RouteHandler>;
    try {
      route = matchRoute(this.routes, ex.method, splitPath(url.pathname)).route;
    } catch (err) {
      if (!isSpcdError(err)) throw err;
      // no route: the handler answers the router's own error
      const body = this.error(ex, what);
      if (body.code !== err.code)
        throw new Error(`contract: ${what} answered ${String(body.code)}, not ${err.code}`);
      this.seen.add(`unrouted ${ex.status}`);
      return;
    }
    const op = `${route.method} ${route.template}`;
    const base = pointer('paths', route.template, route.method.toLowerCase());
    const paths = this.document.paths as Record<string, Record<string, { responses: Record<string, Json> }>>;
    const response = paths[route.template]?.[route.method.toLowerCase()]?.responses[String(ex.status)];
    if (!response) throw new Error(`contract: ${what} answered ${ex.status}, which ${op} does not document`);
    this.seen.add(`${op} ${ex.status}`);
    const content = response.content as Record<string, unknown> | undefined;
    if (!content) {
      if (ex.text !== '') throw new Error(`contract: ${what} ${ex.status} documents no body but sent one`);
      return;
    }
    const sent = (ex.contentType ?? '').split(';')[0]?.trim() ?? '';
    const type = Object.keys(content).find((t) => t.split(';')[0]?.trim() === sent);
    if (type === undefined)
      throw new Error(
        `contract: ${what} answered ${sent || 'no content-type'}; ${op} documents ${Object.keys(content).join(', ')}`,
      );
    const ptr = pointer(
      'paths',
      route.template,
      route.method.toLowerCase(),
      'responses',
      String(ex.status),
      'content',
      type,
      'schema',
    );
    if (ex.status >= 400) this.error(ex, what);
    if (type === 'application/json') this.validate(ptr, JSON.parse(ex.text), `${what} (${ex.status})`);
    else if (type === 'application/x-ndjson') {
      for (const line of ex.text.split('\n'))
        if (line.trim() !== '') this.validate(ptr, JSON.parse(line), `${what}: a line`);
    } else this.validate(ptr, ex.text, `${what} (${ex.status})`);
    // what the daemon accepted, the document must accept too
    if (ex.status < 300 && ex.requestBody !== undefined && ex.requestBody.trim() !== '') {
      this.validate(
        `${base}/requestBody/content/application~1json/schema`,
        JSON.parse(ex.requestBody),
        `${what}: the accepted body`,
      );
    }
  }

  /** One line of GET /v1/events. */
  checkEventLine(line: string): void {
    this.validate(
      pointer('components', 'schemas', 'EventLine'),
      JSON.parse(line),
      `an event line: ${line.slice(0, 200)}`,
    );
    this.seen.add('GET /v1/events 200');
  }
}

let shared: ApiContract | null = null;
/** The contract every test client checks against (built once per test file). */
export function apiContract(): ApiContract {
  shared ??= new ApiContract();
  return shared;
}

/** Every documented operation as "METHOD template". */
export function documentedOperations(doc: Json): string[] {
  const out: string[] = [];
  for (const [template, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const method of Object.keys(item)) out.push(`${method.toUpperCase()} ${template}`);
  }
  return out.sort();
}

/** A template with its parameters filled in: "/v1/containers/{name}" + {name: "web"}. */
export function fill(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = values[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${template}`);
    return v;
  });
}

/** The documented operations no answer with one of `statuses` was seen for. */
export function unexercised(
  contract: ApiContract,
  ops: readonly string[],
  statuses: readonly number[],
): string[] {
  return ops.filter((op) => !statuses.some((s) => contract.seen.has(`${op} ${s}`)));
}
