/**
 * The read-only tier of the API (createApiHandlers().readOnly) on a temporary
 * socket with fakes: the reads answer as on the admin socket; every other
 * method, and the routes kept for the admin socket, answer 403
 * READ_ONLY_SOCKET without reaching the actions; each refusal is audited
 * with the socket and the caller's credentials. (The socket's file, group
 * and a real non-root caller: test/security/readonly-socket.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandlers, type ApiHandlers } from '../../agent/api/handler.js';
import { listenMetricsTcp } from '../../agent/api/socket.js';
import { buildRoutes } from '../../agent/api/routes/table.js';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { request } from 'node:http';
import { pino } from 'pino';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, serveOnTempSocket } from '../support/api-http.js';
import { logLines } from '../support/log-lines.js';

/** A request outside the OpenAPI contract (methods no route documents), with an empty JSON body. */
function raw(socketPath: string, method: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, method, path, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

const status = new FakeStatus();
const actions = new FakeActions(status);
const { lines, sink } = logLines();
let handlers: ApiHandlers;
let admin: { socketPath: string; close: () => Promise<void> };
let readOnly: { socketPath: string; close: () => Promise<void> };

beforeAll(async () => {
  const log = pino({ level: 'info' }, sink);
  handlers = createApiHandlers({
    status,
    actions,
    log,
    version: '0.1.0-test',
    peerCred: () => ({ uid: 1234, gid: 5678, pid: 42 }),
  });
  admin = await serveOnTempSocket(handlers.admin);
  readOnly = await serveOnTempSocket(handlers.readOnly);
});
afterAll(async () => {
  await admin.close();
  await readOnly.close();
});

describe('the read-only socket', () => {
  it('answers the reads as the admin socket does', async () => {
    for (const path of ['/v1/status', '/v1/sets', '/v1/containers/cron', '/v1/plan']) {
      const ro = await call(readOnly.socketPath, 'GET', path);
      expect(ro.status, path).toBe(200);
      expect(ro.text, path).toBe((await call(admin.socketPath, 'GET', path)).text);
    }
    const metrics = await call(readOnly.socketPath, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('spcd_container_state');
  });

  it('refuses every POST route, and the container logs, with READ_ONLY_SOCKET, and audits the refusal', async () => {
    const refused = buildRoutes(new MetricsRegistry()).filter((r) => !r.readOnlySocket);
    expect(refused.map((r) => `${r.method} ${r.template}`)).toContain('GET /v1/containers/{name}/logs');
    expect(refused.filter((r) => r.method === 'POST').length).toBe(
      buildRoutes(new MetricsRegistry()).filter((r) => r.method === 'POST').length,
    );
    const before = actions.calls.length;
    lines.length = 0;
    for (const route of refused) {
      const path = route.template.replace('{name}', 'cron').replace('{set}', 'compute');
      const a = await call(readOnly.socketPath, route.method, path, route.method === 'POST' ? {} : undefined);
      expect(a.status, path).toBe(403);
      expect((a.json() as { code: string }).code, path).toBe('READ_ONLY_SOCKET');
    }
    expect(actions.calls.length).toBe(before);
    const audit = lines.filter((l) => l.audit === true);
    expect(audit).toHaveLength(refused.length);
    expect(audit[0]).toMatchObject({ socket: 'read-only', status: 403, code: 'READ_ONLY_SOCKET', uid: 1234 });
  });

  it('refuses any method but GET, on any path, before matching a route', async () => {
    for (const method of ['PUT', 'DELETE', 'PATCH', 'HEAD']) {
      for (const path of ['/v1/containers/cron', '/nowhere']) {
        const a = await raw(readOnly.socketPath, method, path);
        expect(a.status, `${method} ${path}`).toBe(403);
        // a HEAD answer has no body
        if (method !== 'HEAD') expect((JSON.parse(a.text) as { code: string }).code).toBe('READ_ONLY_SOCKET');
      }
    }
    // the admin socket answers the same requests as before: no such method, no such route
    expect((await raw(admin.socketPath, 'PUT', '/v1/containers/cron')).status).toBe(405);
    expect((await raw(admin.socketPath, 'PUT', '/nowhere')).status).toBe(404);
  });

  it('serves /metrics on the TCP listener through the same read-only handler', async () => {
    const tcp = await listenMetricsTcp(handlers.readOnly, { host: '127.0.0.1', port: 0 });
    try {
      const get = await fetch(`http://127.0.0.1:${tcp.port}/metrics`);
      expect(get.status).toBe(200);
      expect(await get.text()).toContain('spcd_container_state');
      expect((await fetch(`http://127.0.0.1:${tcp.port}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await tcp.close();
    }
  });
});
