/**
 * The connection cap against slow and stuck clients, on a real unix socket
 * in a temp dir with the real handler (fake StatusView/Actions): an operator's
 * GET /v1/status must answer while 300 clients trickle one byte per second
 * and a few hold event streams without reading.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler, type ApiHandler } from '../../agent/api/handler.js';
import { ApiClient } from '../../agent/cli/client.js';
import { DEFAULT_LIMITS } from '../../agent/api/limits.js';
import { listenUnix, type ApiServer } from '../../agent/api/socket.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { startSlowClients, type SlowClients } from '../support/slow-clients.js';
import { waitFor } from '../support/wait.js';

let base: string;
let handler: ApiHandler;

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'spcd-slow-it-'));
  const status = new FakeStatus();
  handler = createApiHandler({
    status,
    actions: new FakeActions(status),
    log: silentLogger(),
    version: 'it',
  });
});

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

/** GET /v1/status on a fresh connection; its HTTP status (0 when the connection failed) and latency. */
function status(socketPath: string, timeoutMs: number): Promise<{ code: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (code: number): void => resolve({ code, ms: performance.now() - started });
    const req = request({ socketPath, path: '/v1/status', agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? 0));
      res.on('error', () => done(0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => done(0));
    req.end();
  });
}

function open(socketPath: string, send?: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(socketPath, () => {
      if (send !== undefined) s.write(send);
      resolve(s);
    });
    s.on('error', reject);
  });
}

const closed = (s: Socket): boolean => s.destroyed || s.readableEnded;

describe('connection slots', () => {
  it('at the cap a new client takes the oldest idle slot; clients being served keep theirs', async () => {
    const api = await listenUnix(handler, {
      socketPath: join(base, 'cap.sock'),
      limits: { maxConnections: 3, connectionGraceMs: 100 },
    });
    try {
      // three clients being served (event streams): nothing to evict, the new client is refused
      const streams = await Promise.all(
        [0, 1, 2].map(() => open(api.socketPath, 'GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n')),
      );
      await waitFor('3 slots taken', () => api.connections().open === 3, { timeoutMs: 5_000 });
      await new Promise((r) => setTimeout(r, 150)); // past the grace: only being served protects them now
      expect((await status(api.socketPath, 3_000)).code).toBe(0);
      expect(api.connections().refused).toBeGreaterThanOrEqual(1);
      expect(streams.some(closed)).toBe(false);
      streams.forEach((s) => s.destroy());
      await waitFor('slots free', () => api.connections().open === 0, { timeoutMs: 5_000 });

      // three idle clients: the oldest one past the grace period gives way
      const idle: Socket[] = [];
      for (const head of ['', 'GET /v1/status HTTP/1.1\r\nHost: x\r\n', '']) {
        idle.push(await open(api.socketPath, head));
        await new Promise((r) => setTimeout(r, 20));
      }
      await waitFor('3 idle', () => api.connections().open === 3, { timeoutMs: 5_000 });
      await waitFor('grace over', async () => {
        await new Promise((r) => setTimeout(r, 120));
        return true;
      });
      expect((await status(api.socketPath, 3_000)).code).toBe(200);
      await waitFor('oldest idle closed', () => closed(idle[0]!), { timeoutMs: 3_000 });
      expect(api.connections().evicted).toBe(1);
      expect(closed(idle[2]!)).toBe(false);
      idle.forEach((s) => s.destroy());
    } finally {
      await api.close();
    }
  });
});

describe('300 slow clients', () => {
  let api: ApiServer;
  let clients: SlowClients | undefined;

  afterAll(async () => {
    await clients?.stop();
    await api?.close();
  });

  it('GET /v1/status answers within a bound while they trickle one byte a second', async () => {
    api = await listenUnix(handler, { socketPath: join(base, 'spcd.sock') }); // the default limits
    const STUCK = 8;
    clients = startSlowClients(api.socketPath, 300, STUCK);
    await waitFor(
      'the slow clients to fill every slot',
      () => {
        const c = clients!.counts();
        return (
          c.slowConnects >= 300 &&
          c.stuckOpen === STUCK &&
          api.connections().open >= DEFAULT_LIMITS.maxConnections
        );
      },
      { timeoutMs: 30_000 },
    );

    // what an operator runs: spcctl's client (a GET reset before any answer is tried again)
    const client = new ApiClient(api.socketPath, 5_000);
    const latencies: number[] = [];
    const codes: number[] = [];
    const until = Date.now() + 6_000; // past the 5 s headers timeout: the slow clients come back
    while (Date.now() < until || latencies.length < 20) {
      const started = performance.now();
      const r = await client.call('GET', '/v1/status').catch((err: unknown) => ({ status: String(err) }));
      codes.push(typeof r.status === 'number' ? r.status : 0);
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 100)); // pacing between samples, not a wait for a condition
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = sorted[Math.floor(sorted.length / 2)]!;
    const max = sorted[sorted.length - 1]!;
    const c = clients.counts();
    const conn = api.connections();
    console.log(
      `slow-clients: GET /v1/status n=${latencies.length} p50_ms=${p50.toFixed(1)} max_ms=${max.toFixed(1)} ` +
        `slow_connects=${c.slowConnects} slow_open=${c.slowOpen} stuck_open=${c.stuckOpen} ` +
        `evicted=${conn.evicted} refused=${conn.refused} open=${conn.open}`,
    );
    expect(codes.filter((code) => code !== 200)).toEqual([]);
    // typically a few ms; the bound leaves slack for a loaded two-core machine
    expect(max).toBeLessThan(2_000);
    // the stuck streams were served, never evicted; the slow clients really held slots
    expect(c.stuckCloses).toBe(0);
    expect(conn.evicted).toBeGreaterThan(0);
    expect(c.slowOpen).toBeGreaterThan(DEFAULT_LIMITS.maxConnections / 2);
  }, 60_000);
});
