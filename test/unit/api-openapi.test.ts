/**
 * The OpenAPI contract: GET /v1/openapi.json describes exactly the router's
 * routes, its error codes are the catalogue's, its schemas compile under
 * ajv's strict 2020-12 mode, every route answers what it documents (through
 * the recording client), and request bodies are refused exactly when their
 * documented schema refuses them. The same recorder checks every answer the
 * integration tests get from real daemons; test/integration/api-contract.test.ts
 * calls every route of a real daemon.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { openApiDocument, routeErrors } from '../../agent/api/openapi/document.js';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { matchRoute, splitPath } from '../../agent/api/router.js';
import { buildRoutes } from '../../agent/api/routes/table.js';
import { ERRORS, SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { apiContract, documentedOperations, fill, unexercised } from '../support/api-contract.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, openEvents, serveOnTempSocket } from '../support/api-http.js';
import { waitFor } from '../support/wait.js';

const status = new FakeStatus();
const actions = new FakeActions(status);
let sock: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const handler = createApiHandler({
    status,
    actions,
    log: silentLogger(),
    version: '9.9.9-test',
    peerCred: () => ({ uid: 0, gid: 0, pid: 1 }),
  });
  const s = await serveOnTempSocket(handler);
  sock = s.socketPath;
  close = s.close;
});
afterAll(() => close());

type Doc = { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> } & Record<
  string,
  unknown
>;
const table = buildRoutes(new MetricsRegistry());
const tableOps = table.map((r) => `${r.method} ${r.template}`).sort();
/** Values for path parameters the fakes know. */
const PARAMS = { name: 'nova_compute', set: 'compute/neutron' };
/** A body each POST route accepts; a new POST route needs one here. */
const VALID_BODIES: Record<string, object> = {
  'POST /v1/containers/{name}/restart': { expectedGeneration: 3 },
  'POST /v1/containers/{name}/stop': {},
  'POST /v1/containers/{name}/start': { expectedGeneration: null },
  'POST /v1/containers/{name}/upgrade': { image: 'spcd-demo/service:2', expectedGeneration: 3 },
  'POST /v1/containers/{name}/rollback': { toGeneration: 2, force: true },
  'POST /v1/sets/{set}/upgrade': { images: { neutron_agent: 'registry.local:5000/neutron@sha256:ab' } },
  'POST /v1/reload': {},
  'POST /v1/containers/{name}/adopt': {},
  'POST /v1/containers/{name}/release': {},
};

describe('the document', () => {
  it('is served at GET /v1/openapi.json, OpenAPI 3.1 with spcd version, built from the route table', async () => {
    const a = await call(sock, 'GET', '/v1/openapi.json');
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toMatch(/^application\/json/);
    const doc = a.json() as Doc;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.jsonSchemaDialect).toBe('https://json-schema.org/draft/2020-12/schema');
    expect((doc.info as { version: string }).version).toBe('9.9.9-test');
    expect(doc).toEqual(JSON.parse(JSON.stringify(openApiDocument(table, '9.9.9-test'))));
  });

  it('documents every route of the router, and every documented route is one the router serves', async () => {
    const doc = (await call(sock, 'GET', '/v1/openapi.json')).json() as Doc;
    const documented = documentedOperations(doc);
    expect(documented).toEqual(tableOps);
    // and the router matches each documented path to that very route
    for (const op of documented) {
      const [method, template] = op.split(' ') as [string, string];
      const matched = matchRoute(table, method, splitPath(fill(template, PARAMS)));
      expect(`${matched.route.method} ${matched.route.template}`).toBe(op);
    }
  });

  it("names the catalogue's codes, and each route's error answers carry the catalogue's status", () => {
    const doc = apiContract().document as Doc;
    const schemas = (
      doc.components as { schemas: Record<string, { properties: { code: { enum: string[] } } }> }
    ).schemas;
    expect(schemas.Error?.properties.code.enum).toEqual(Object.keys(ERRORS));
    for (const route of table) {
      const responses = doc.paths[route.template]?.[route.method.toLowerCase()]?.responses ?? {};
      for (const code of routeErrors(route.doc, route.readOnlySocket)) {
        const r = responses[String(ERRORS[code].status)] as
          | {
              content: {
                'application/json': { schema: { allOf: { properties?: { code: { enum: string[] } } }[] } };
              };
            }
          | undefined;
        const codes = r?.content['application/json'].schema.allOf[1]?.properties?.code.enum;
        expect(codes, `${route.method} ${route.template} ${code}`).toContain(code);
      }
    }
  });

  it('every schema in it compiles under ajv strict mode (JSON Schema 2020-12)', () => {
    const contract = apiContract();
    const doc = contract.document as Doc;
    let compiled = 0;
    for (const name of Object.keys((doc.components as { schemas: object }).schemas)) {
      contract.schemaAt(`components/schemas/${name}`);
      compiled++;
    }
    const esc = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');
    for (const [template, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item as Record<string, Record<string, unknown>>)) {
        const base = `paths/${esc(template)}/${method}`;
        for (const [st, r] of Object.entries(op.responses as Record<string, { content?: object }>)) {
          for (const type of Object.keys(r.content ?? {})) {
            contract.schemaAt(`${base}/responses/${st}/content/${esc(type)}/schema`);
            compiled++;
          }
        }
        if (op.requestBody) contract.schemaAt(`${base}/requestBody/content/application~1json/schema`);
      }
    }
    expect(compiled).toBeGreaterThan(tableOps.length);
  });

  it('refuses a route whose path parameter has no description', () => {
    const [first] = table;
    if (!first) throw new Error('empty table');
    const broken = { ...first, template: '/v1/things/{id}', doc: { ...first.doc, params: {} } };
    expect(() => openApiDocument([broken], 'x')).toThrow(/\{id\} has no description/);
  });
});

describe('answers follow the document (the recording client checks each one)', () => {
  it('every route answers what it documents', async () => {
    const contract = apiContract();
    const tap = await openEvents(sock);
    for (const op of tableOps) {
      const [method, template] = op.split(' ') as [string, string];
      const path = fill(
        template,
        method === 'POST' && template.startsWith('/v1/sets') ? { set: 'compute' } : PARAMS,
      );
      if (template === '/v1/events') continue; // followed by the tap
      if (method === 'GET') {
        const query = template.endsWith('/logs')
          ? '?tail=2'
          : template.endsWith('/diff')
            ? '?from=2&to=3'
            : '';
        const a = await call(sock, 'GET', `${path}${query}`);
        expect(a.status, op).toBe(200);
      } else {
        const body = VALID_BODIES[op];
        if (!body) throw new Error(`${op}: add a body it accepts to VALID_BODIES`);
        const a = await call(sock, 'POST', path, body);
        expect(a.status, op).toBe(202);
        actions.finish(a.json() as never, true);
      }
    }
    const etag = (await call(sock, 'GET', '/v1/status')).headers.etag;
    if (etag)
      expect((await call(sock, 'GET', '/v1/status', undefined, { 'if-none-match': etag })).status).toBe(304);
    await waitFor('operation events on the stream', () =>
      tap.events.some((e) => e.type === 'operation' && e.phase === 'succeeded'),
    );
    tap.close();
    expect(unexercised(contract, tableOps, [200, 202])).toEqual([]);
  });

  it('error answers carry a documented code with its catalogue status', async () => {
    expect((await call(sock, 'GET', '/v1/containers/ghost')).status).toBe(404);
    expect((await call(sock, 'GET', '/v1/nothing')).status).toBe(404);
    expect((await call(sock, 'DELETE', '/v1/status')).status).toBe(405);
    expect((await call(sock, 'GET', '/v1/containers/%E0%A4%A')).status).toBe(400);
    expect((await call(sock, 'POST', '/v1/reload', '[1]')).status).toBe(400);
    expect((await call(sock, 'GET', '/v1/containers/nova_compute/logs?tail=-1')).status).toBe(422);
    actions.locked.set('cron', 'op-x');
    expect((await call(sock, 'POST', '/v1/containers/cron/restart', {})).status).toBe(409);
    actions.locked.clear();
  });

  it('fails a call whose answer has a field the document does not name', async () => {
    const odd = new FakeStatus();
    const container = odd.container.bind(odd);
    odd.container = (n) => {
      const c = container(n);
      return c ? ({ ...c, colour: 'blue' } as never) : undefined;
    };
    const srv = await serveOnTempSocket(
      createApiHandler({ status: odd, actions: new FakeActions(odd), log: silentLogger(), version: 'x' }),
    );
    try {
      await expect(call(srv.socketPath, 'GET', '/v1/containers/cron')).rejects.toThrow(
        /does not match .*ContainerStatus|must NOT have additional properties/,
      );
    } finally {
      await srv.close();
    }
  });

  it('fails a call answered with an error code the route does not document', async () => {
    const fails = new FakeActions(status);
    fails.failWith = new SpcdError('STATE_LOCKED', 'not an answer of this route');
    const srv = await serveOnTempSocket(
      createApiHandler({
        status,
        actions: fails,
        log: silentLogger(),
        version: 'x',
        peerCred: () => ({ uid: 0, gid: 0, pid: 1 }),
      }),
    );
    try {
      await expect(call(srv.socketPath, 'POST', '/v1/reload', {})).rejects.toThrow(
        /contract: .*\/v1\/reload/,
      );
    } finally {
      await srv.close();
    }
  });
});

describe("a reload's result names the operations it caused", () => {
  const line = (result: object, kind = 'reload'): string =>
    JSON.stringify({
      type: 'operation',
      at: 1,
      operationId: `${kind}-1`,
      kind,
      target: 'definitions',
      phase: 'succeeded',
      result,
    });
  const recover = { operationId: 'recover-1', kind: 'recover', container: 'svc', outcome: 'cleared' };

  it('an operation event of a reload carries a ReloadResult, with each retry by id', () => {
    const contract = apiContract();
    contract.checkEventLine(line({ containers: 2, changes: [], operations: [] }));
    contract.checkEventLine(
      line({
        containers: 2,
        changes: [{ kind: 'recover', reason: 'journal entry tried again' }],
        quarantined: ['db'],
        operations: [recover, { ...recover, container: 'db', outcome: 'quarantined' }],
      }),
    );
  });

  it('refuses a reload result without its operations, or with an operation the schema does not describe', () => {
    const contract = apiContract();
    expect(() => contract.checkEventLine(line({ containers: 2, changes: [] }))).toThrow(/contract/);
    expect(() =>
      contract.checkEventLine(
        line({ containers: 2, changes: [], operations: [{ ...recover, outcome: 'ok' }] }),
      ),
    ).toThrow(/contract/);
    // Other kinds' results stay open.
    contract.checkEventLine(line({ generation: 3 }, 'restart'));
  });
});

describe('request bodies are refused exactly when their documented schema refuses them', () => {
  const SAMPLES: unknown[] = [
    {},
    { expectedGeneration: 0 },
    { expectedGeneration: -1 },
    { expectedGeneration: 1.5 },
    { expectedGeneration: '3' },
    { expectedGeneration: null },
    { image: 'spcd-demo/service:2' },
    { image: '' },
    { image: '-leading-dash' },
    { image: 'a'.repeat(513) },
    { image: null },
    { image: 7 },
    { toGeneration: 0 },
    { toGeneration: 1 },
    { force: 'yes' },
    { force: false, toGeneration: null },
    { images: { cron: 'a/b:1' } },
    { images: { cron: 5 } },
    { images: { cron: null } },
    { images: [] },
    { images: 'cron=a' },
    { bogus: 1 },
  ];

  it.each(table.filter((r) => r.doc.body).map((r) => [`${r.method} ${r.template}`, r.template] as const))(
    '%s',
    async (op, template) => {
      const accepts = apiContract().schemaAt(
        `paths/${template.replace(/\//g, '~1')}/post/requestBody/content/application~1json/schema`,
      );
      for (const body of SAMPLES) {
        const path = fill(template, { ...PARAMS, set: 'compute' });
        const a = await call(sock, 'POST', path, body as object);
        actions.locked.clear();
        const refused = a.status === 422;
        expect(refused, `${op} ${JSON.stringify(body).slice(0, 80)}: ${a.text}`).toBe(!accepts(body));
        if (refused) expect((a.json() as { details: { field?: string } }).details.field).toBeTruthy();
      }
    },
  );
});
