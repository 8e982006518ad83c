import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findProcess, httpProbe, processProbe, tcpProbe } from '../../agent/health/host-probes.js';

const never = new AbortController().signal;

describe('host-side probes', () => {
  let server: http.Server;
  let port = 0;
  let closedPort = 0;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/hang') return; // never answers
      res.statusCode = req.url === '/down' ? 503 : 200;
      res.end(req.url === '/down' ? 'maintenance' : 'ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    const tmp = net.createServer();
    await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
    closedPort = (tmp.address() as AddressInfo).port;
    await new Promise<void>((r) => tmp.close(() => r()));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('tcp: connects to a listener, fails on a closed port', async () => {
    expect(await tcpProbe('127.0.0.1', port, 1000, never)).toMatchObject({ ok: true, timedOut: false });
    const bad = await tcpProbe('127.0.0.1', closedPort, 1000, never);
    expect(bad).toMatchObject({ ok: false, timedOut: false });
    expect(bad.output).toContain('ECONNREFUSED');
  });

  it('http: 2xx is ok, 503 fails unless expected, a hung server times out', async () => {
    expect(await httpProbe(`http://127.0.0.1:${port}/`, [], 1000, 100, never)).toMatchObject({
      ok: true,
      output: 'HTTP 200: ok',
    });
    expect(await httpProbe(`http://127.0.0.1:${port}/down`, [], 1000, 100, never)).toMatchObject({
      ok: false,
    });
    expect(await httpProbe(`http://127.0.0.1:${port}/down`, [503], 1000, 4, never)).toMatchObject({
      ok: true,
      output: 'HTTP 503: ance',
    });
    const t0 = Date.now();
    const hung = await httpProbe(`http://127.0.0.1:${port}/hang`, [], 200, 100, never);
    expect(hung).toMatchObject({ ok: false, timedOut: true });
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('honors an abort', async () => {
    const ac = new AbortController();
    const p = httpProbe(`http://127.0.0.1:${port}/hang`, [], 60_000, 100, ac.signal);
    ac.abort();
    expect(await p).toMatchObject({ ok: false, timedOut: false });
  });

  it('process: finds a comm among the descendants of a PID, and not a missing one', async () => {
    const comm = readFileSync('/proc/self/comm', 'utf8').trim();
    expect(findProcess(comm, { containerId: '', pid: process.pid })).toBe(process.pid);
    expect(await processProbe(comm, { containerId: '', pid: process.pid }, 1000, never)).toMatchObject({
      ok: true,
    });
    expect(
      await processProbe('no-such-comm-x', { containerId: '', pid: process.pid }, 1000, never),
    ).toMatchObject({ ok: false });
  });
});
