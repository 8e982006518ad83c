import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { ERRORS, SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, serveOnTempSocket } from '../support/api-http.js';

const status = new FakeStatus();
const actions = new FakeActions(status);
// The daemon's families share the one registry the API renders.
const registry = new MetricsRegistry();
registry.counter({ name: 'spcd_reconcile_total', help: 'A daemon family.' }).inc({}, 7);
let sock: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const handler = createApiHandler({
    status,
    actions,
    log: silentLogger(),
    version: '0.1.0-test',
    peerCred: () => ({ uid: 0, gid: 0, pid: 1 }),
    metrics: registry,
  });
  const s = await serveOnTempSocket(handler);
  sock = s.socketPath;
  close = s.close;
});
afterAll(() => close());

function expectError(
  a: { status: number; json: () => unknown },
  code: keyof typeof ERRORS,
): Record<string, unknown> {
  expect(a.status).toBe(ERRORS[code].status);
  const body = a.json() as { code: string; message: string; details: Record<string, unknown> };
  expect(body.code).toBe(code);
  expect(typeof body.message).toBe('string');
  expect(typeof body.details).toBe('object');
  return body.details;
}

describe('read routes', () => {
  it('GET /v1/status answers the status document', async () => {
    const a = await call(sock, 'GET', '/v1/status');
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toMatch(/application\/json/);
    const doc = a.json() as {
      version: string;
      sets: { containers: { name: string; imageDigest: string }[] }[];
    };
    expect(doc.version).toBe('0.1.0-test');
    expect(doc.sets[0]?.containers[0]?.name).toBe('nova_compute');
    expect(doc.sets[0]?.containers[0]?.imageDigest).toMatch(/^sha256:/);
  });

  it('GET /v1/sets and /v1/sets/{set} including a nested set path', async () => {
    expect(((await call(sock, 'GET', '/v1/sets')).json() as { sets: unknown[] }).sets).toHaveLength(2);
    const nested = await call(sock, 'GET', '/v1/sets/compute/neutron');
    expect(nested.status).toBe(200);
    expect((nested.json() as { path: string }).path).toBe('compute/neutron');
    const encoded = await call(sock, 'GET', '/v1/sets/compute%2Fneutron');
    expect((encoded.json() as { path: string }).path).toBe('compute/neutron');
    expectError(await call(sock, 'GET', '/v1/sets/nope'), 'NOT_FOUND');
  });

  it('GET container, health, generations', async () => {
    const c = await call(sock, 'GET', '/v1/containers/cron');
    expect((c.json() as { set: string }).set).toBe('infra');
    const h = (await call(sock, 'GET', '/v1/containers/cron/health')).json() as {
      checks: { name: string }[];
    };
    expect(h.checks.map((x) => x.name)).toEqual(['port', 'rpc']);
    const g = (await call(sock, 'GET', '/v1/containers/cron/generations')).json() as {
      name: string;
      generations: { generation: number }[];
    };
    expect(g.name).toBe('cron');
    expect(g.generations.map((x) => x.generation)).toEqual([3, 2]);
    for (const p of [
      '/v1/containers/ghost',
      '/v1/containers/ghost/health',
      '/v1/containers/ghost/generations',
    ]) {
      expect(expectError(await call(sock, 'GET', p), 'NOT_FOUND')).toEqual({ container: 'ghost' });
    }
  });

  it('GET /v1/plan answers the PlanView', async () => {
    const p = (await call(sock, 'GET', '/v1/plan')).json() as {
      items: { action: string }[];
      problems: string[];
    };
    expect(p.items[0]?.action).toBe('recreate');
    expect(p.problems).toEqual([]);
  });

  it('GET /metrics: container gauges, request counters, the daemon families in the same registry', async () => {
    await call(sock, 'GET', '/v1/status');
    const m = await call(sock, 'GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.headers['content-type']).toMatch(/text\/plain; version=0.0.4/);
    expect(m.text).toContain(
      'spcd_container_state{container="nova_compute",set="compute",state="running"} 1',
    );
    expect(m.text).toContain('spcd_container_generation{container="cron",set="infra"} 3');
    expect(m.text).toContain('spcd_container_restarts_total{container="cron",set="infra"} 0');
    expect(m.text).toContain('spcd_container_health{container="cron",set="infra",health="healthy"} 1');
    expect(m.text).toMatch(
      /spcd_api_requests_total\{route="GET \/v1\/status",method="GET",status="200"\} \d+/,
    );
    expect(m.text).toContain('spcd_api_request_duration_seconds_bucket{route="GET /v1/status",le="+Inf"}');
    expect(m.text).toContain('spcd_reconcile_total 7');
    // The process's own figures: this test process's, within what /proc says of it.
    const rss = Number(/^process_resident_memory_bytes (\d+)$/m.exec(m.text)?.[1]);
    expect(rss).toBeGreaterThan(10 * 1024 * 1024);
    expect(rss).toBeLessThan(os.totalmem());
    const used = Number(/^nodejs_heap_size_used_bytes (\d+)$/m.exec(m.text)?.[1]);
    const total = Number(/^nodejs_heap_size_total_bytes (\d+)$/m.exec(m.text)?.[1]);
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThanOrEqual(total);
    expect(m.text).toMatch(/^process_cpu_seconds_total \d+(\.\d+)?$/m);
    const started = Number(/^process_start_time_seconds (\d+)$/m.exec(m.text)?.[1]);
    expect(Math.abs(started - (Date.now() / 1000 - process.uptime()))).toBeLessThan(2);
  });
});

describe('write routes answer 202 with an OperationRef', () => {
  it.each([
    ['restart', {}],
    ['stop', { expectedGeneration: 3 }],
    ['start', {}],
    ['upgrade', { image: 'spcd-demo/service:2', expectedGeneration: 3 }],
    ['rollback', { toGeneration: 2, force: true }],
  ])('POST /v1/containers/{name}/%s', async (kind, body) => {
    const a = await call(sock, 'POST', `/v1/containers/neutron_agent/${kind}`, body);
    expect(a.status).toBe(202);
    const ref = a.json() as { operationId: string; kind: string; target: string; acceptedAt: string };
    expect(ref.kind).toBe(kind);
    expect(ref.target).toBe('neutron_agent');
    expect(actions.calls.at(-1)?.opts).toEqual(body);
    actions.finish(ref as never, true);
  });

  it('POST without a body is an empty body', async () => {
    const a = await call(sock, 'POST', '/v1/containers/cron/restart');
    expect(a.status).toBe(202);
    actions.finish(a.json() as never, true);
  });

  it('POST /v1/sets/{set}/upgrade and /v1/reload', async () => {
    const s = await call(sock, 'POST', '/v1/sets/compute/neutron/upgrade', {
      images: { neutron_agent: 'x/y:2' },
    });
    expect(s.status).toBe(202);
    expect(actions.calls.at(-1)).toEqual({
      kind: 'upgrade-set',
      target: 'compute/neutron',
      opts: { images: { neutron_agent: 'x/y:2' } },
    });
    expectError(await call(sock, 'POST', '/v1/sets/ghost/upgrade', {}), 'NOT_FOUND');
    const r = await call(sock, 'POST', '/v1/reload');
    expect(r.status).toBe(202);
    expect((r.json() as { kind: string }).kind).toBe('reload');
  });

  it('GENERATION_MISMATCH and NOT_FOUND from Actions propagate as 409 and 404', async () => {
    const d = expectError(
      await call(sock, 'POST', '/v1/containers/cron/upgrade', { image: 'a/b:1', expectedGeneration: 9 }),
      'GENERATION_MISMATCH',
    );
    expect(d).toEqual({ expected: 9, current: 3 });
    expectError(await call(sock, 'POST', '/v1/containers/ghost/restart', {}), 'NOT_FOUND');
  });
});

describe('errors', () => {
  it('unknown route 404, wrong method 405 with Allow', async () => {
    expectError(await call(sock, 'GET', '/v2/status'), 'NOT_FOUND');
    expectError(await call(sock, 'GET', '/v1/containers/cron/nothing'), 'NOT_FOUND');
    const a = await call(sock, 'DELETE', '/v1/status');
    expect(expectError(a, 'METHOD_NOT_ALLOWED')).toEqual({ allow: ['GET'] });
    expect(a.headers.allow).toBe('GET');
    const b = await call(sock, 'GET', '/v1/containers/cron/upgrade');
    expect(b.headers.allow).toBe('POST');
    expectError(await call(sock, 'POST', '/v1/status', {}), 'METHOD_NOT_ALLOWED');
  });

  it('bad JSON and non-object bodies are 400', async () => {
    expectError(
      await call(sock, 'POST', '/v1/containers/cron/restart', '{"expectedGeneration":'),
      'BAD_REQUEST',
    );
    expectError(await call(sock, 'POST', '/v1/containers/cron/restart', '[1,2]'), 'BAD_REQUEST');
    expectError(await call(sock, 'POST', '/v1/containers/cron/restart', 'null'), 'BAD_REQUEST');
    expectError(await call(sock, 'GET', '/v1/containers/%E0%A4%A'), 'BAD_REQUEST');
  });

  it('bad field values are 422 naming the field', async () => {
    const cases: [string, unknown, string][] = [
      ['upgrade', {}, 'image'],
      ['upgrade', { image: '' }, 'image'],
      ['upgrade', { image: 'bad image ref' }, 'image'],
      ['upgrade', { image: 'a/b:1', expectedGeneration: -1 }, 'expectedGeneration'],
      ['upgrade', { image: 'a/b:1', expectedGeneration: '3' }, 'expectedGeneration'],
      ['rollback', { toGeneration: 0 }, 'toGeneration'],
      ['rollback', { force: 'yes' }, 'force'],
      ['restart', { expectdGeneration: 1 }, 'expectdGeneration'],
    ];
    for (const [kind, body, field] of cases) {
      const d = expectError(
        await call(sock, 'POST', `/v1/containers/cron/${kind}`, body as object),
        'UNPROCESSABLE',
      );
      expect(d.field).toBe(field);
    }
    const s = expectError(
      await call(sock, 'POST', '/v1/sets/infra/upgrade', { images: { cron: 7 } }),
      'UNPROCESSABLE',
    );
    expect(s.field).toBe('images.cron');
    const q = expectError(await call(sock, 'GET', '/v1/containers/cron/logs?tail=abc'), 'UNPROCESSABLE');
    expect(q.field).toBe('tail');
  });

  it('a non-SpcdError becomes INTERNAL with a generic message', async () => {
    const s = new FakeStatus();
    s.plan = async () => {
      throw new Error('secret stack detail');
    };
    const h = createApiHandler({ status: s, actions: new FakeActions(s), log: silentLogger(), version: 'x' });
    const srv = await serveOnTempSocket(h);
    try {
      const a = await call(srv.socketPath, 'GET', '/v1/plan');
      expectError(a, 'INTERNAL');
      expect(a.text).not.toContain('secret');
    } finally {
      await srv.close();
    }
  });

  it('ENGINE_UNAVAILABLE from a view answers 503', async () => {
    const s = new FakeStatus();
    s.status = async () => {
      throw new SpcdError('ENGINE_UNAVAILABLE', 'docker does not answer');
    };
    const h = createApiHandler({ status: s, actions: new FakeActions(s), log: silentLogger(), version: 'x' });
    const srv = await serveOnTempSocket(h);
    try {
      expectError(await call(srv.socketPath, 'GET', '/v1/status'), 'ENGINE_UNAVAILABLE');
    } finally {
      await srv.close();
    }
  });
});

describe('two concurrent upgrades of one container', () => {
  it('exactly one wins; the other gets 409 CONFLICT', async () => {
    const s = new FakeStatus();
    const a = new FakeActions(s, 5);
    const h = createApiHandler({ status: s, actions: a, log: silentLogger(), version: 'x' });
    const srv = await serveOnTempSocket(h);
    try {
      const [one, two] = await Promise.all([
        call(srv.socketPath, 'POST', '/v1/containers/cron/upgrade', { image: 'spcd-demo/service:2' }),
        call(srv.socketPath, 'POST', '/v1/containers/cron/upgrade', { image: 'spcd-demo/service:3' }),
      ]);
      expect([one.status, two.status].sort()).toEqual([202, 409]);
      const loser = one.status === 409 ? one : two;
      expect((loser.json() as { code: string }).code).toBe('CONFLICT');
    } finally {
      await srv.close();
    }
  });
});

describe('GET /v1/status with StatusView.revision()', () => {
  it('serializes once per revision, answers ETag and 304, and follows a new revision', async () => {
    const s = new FakeStatus(undefined, { revision: true });
    let built = 0;
    const orig = s.status.bind(s);
    s.status = async () => {
      built++;
      return orig();
    };
    const h = createApiHandler({ status: s, actions: new FakeActions(s), log: silentLogger(), version: 'x' });
    const srv = await serveOnTempSocket(h);
    try {
      const a = await call(srv.socketPath, 'GET', '/v1/status');
      const b = await call(srv.socketPath, 'GET', '/v1/status');
      expect(a.status).toBe(200);
      expect(b.text).toBe(a.text);
      expect(built).toBe(1);
      const etag = String(a.headers.etag);
      expect(etag).toBe('"r1"');
      const c = await call(srv.socketPath, 'GET', '/v1/status', undefined, { 'if-none-match': etag });
      expect(c.status).toBe(304);
      expect(c.text).toBe('');
      s.setList = s.setList.slice(0, 1);
      s.touch();
      const d = await call(srv.socketPath, 'GET', '/v1/status', undefined, { 'if-none-match': etag });
      expect(d.status).toBe(200);
      expect(d.headers.etag).toBe('"r2"');
      expect((d.json() as { sets: unknown[] }).sets).toHaveLength(1);
      expect(built).toBe(2);
    } finally {
      await srv.close();
    }
  });
});
