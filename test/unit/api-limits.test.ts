import { connect } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonDepth, parseJsonObject } from '../../agent/api/body.js';
import { createApiHandler } from '../../agent/api/handler.js';
import { compileLimits } from '../../agent/api/limits.js';
import { isSpcdError } from '../../agent/errors.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, serveOnTempSocket } from '../support/api-http.js';
import { logLines } from '../support/log-lines.js';
import { waitFor } from '../support/wait.js';

const { lines, sink } = logLines();
const status = new FakeStatus();
const actions = new FakeActions(status);
let sock: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const handler = createApiHandler({
    status,
    actions,
    log: pino({ level: 'info' }, sink),
    version: 'x',
    limits: { bodyBytes: 1024, jsonDepth: 4 },
    peerCred: () => ({ uid: 4242, gid: 4242, pid: 1 }),
  });
  const s = await serveOnTempSocket(handler, { bodyBytes: 1024, jsonDepth: 4 });
  sock = s.socketPath;
  close = s.close;
});
afterAll(() => close());

/** Raw bytes in, raw answer out (until the server closes or `ms` passes). */
function raw(data: string, ms = 2_000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(sock);
    let out = '';
    // a deadline: a connection idle for `ms` is closed
    s.setTimeout(ms, () => s.destroy());
    s.on('data', (c) => (out += c.toString()));
    s.on('error', () => undefined);
    s.on('close', () => resolve(out));
    s.write(data);
  });
}

describe('body cap', () => {
  it('a declared Content-Length over the cap is 413 and the connection closes', async () => {
    const body = '{"image":"' + 'a'.repeat(2000) + '"}';
    const out = await raw(
      `POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(out).toMatch(/^HTTP\/1.1 413/);
    expect(out).toContain('"code":"BODY_TOO_LARGE"');
    expect(out.toLowerCase()).toContain('connection: close');
  });

  it('a chunked body that grows over the cap is 413, never truncated and acted on', async () => {
    const before = actions.calls.length;
    const chunk = 'a'.repeat(600);
    const out = await raw(
      `POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${(600).toString(16)}\r\n${chunk}\r\n${(600).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`,
    );
    expect(out).toMatch(/^HTTP\/1.1 413/);
    expect(actions.calls.length).toBe(before);
    expect((await call(sock, 'GET', '/v1/status')).status).toBe(200);
  });
});

describe('JSON depth cap', () => {
  it('nesting deeper than the cap is 400, at the cap is fine', async () => {
    const deep = await call(sock, 'POST', '/v1/sets/infra/upgrade', '{"images":{"a":{"b":{"c":{"d":1}}}}}');
    expect(deep.status).toBe(400);
    expect(deep.json()).toMatchObject({ code: 'BAD_REQUEST', details: { limit: 4, depth: 5 } });
    const ok = await call(sock, 'POST', '/v1/sets/infra/upgrade', '{"images":{"cron":"a/b:1"}}');
    expect(ok.status).toBe(202);
  });

  it('jsonDepth ignores brackets inside strings', () => {
    expect(jsonDepth('{"a":"[[[{{{\\"]]"}')).toBe(1);
    expect(jsonDepth('[[[]]]')).toBe(3);
    expect(() => parseJsonObject('[[[[[[1]]]]]]', 3)).toThrow(/deeper/);
    try {
      parseJsonObject('{', 3);
    } catch (e) {
      expect(isSpcdError(e, 'BAD_REQUEST')).toBe(true);
    }
  });
});

describe('limits', () => {
  it('defaults are the documented ones; bad values are SETTINGS_INVALID', () => {
    expect(compileLimits()).toMatchObject({
      bodyBytes: 65536,
      headersTimeoutMs: 5000,
      requestTimeoutMs: 30000,
      maxConnections: 64,
      jsonDepth: 32,
    });
    expect(() => compileLimits({ bodyBytes: -1 })).toThrow(/bodyBytes/);
  });
});

describe('audit', () => {
  it('every mutating request is logged with route, target, outcome, duration, operation and uid', async () => {
    lines.length = 0;
    const ok = await call(sock, 'POST', '/v1/containers/neutron_agent/restart', {});
    actions.finish(ok.json() as never, true);
    await call(sock, 'POST', '/v1/containers/ghost/stop', {});
    await call(sock, 'GET', '/v1/status');
    await waitFor('two audit lines', () => lines.filter((l) => l.audit).length >= 2);
    const audit = lines.filter((l) => l.audit);
    expect(audit).toHaveLength(2);
    expect(audit[0]).toMatchObject({
      route: '/v1/containers/{name}/restart',
      method: 'POST',
      target: 'neutron_agent',
      status: 202,
      code: null,
      operationId: (ok.json() as { operationId: string }).operationId,
      socket: 'admin',
      uid: 4242,
      gid: 4242,
      pid: 1,
    });
    expect(typeof audit[0]?.durationMs).toBe('number');
    expect(audit[1]).toMatchObject({ target: 'ghost', status: 404, code: 'NOT_FOUND', operationId: null });
  });
});
