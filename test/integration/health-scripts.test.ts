/**
 * The shipped check scripts (healthchecks/healthcheck_*), run for real:
 * inside the busybox demo image through spcd's own exec path, and on this
 * Debian host with /bin/sh = dash, GNU coreutils, curl and python3 (standing
 * in for a Debian image, which cannot be pulled here).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExec } from '../../agent/engine/exec.js';
import type { ExecEngine } from '../../agent/engine/types.js';
import { makeProbe } from '../../agent/health/probe.js';
import type { HostProbes, ProbeOutcome } from '../../agent/health/types.js';
import { silentLogger } from '../../agent/log.js';
import { amqpCheck } from '../support/spec.js';
import { waitFor } from '../support/wait.js';

const INSTANCE = 'health-scripts-test';
const SCRIPTS = resolve('healthchecks');
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const log = silentLogger();

async function removeOurs(): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`spcd.instance=${INSTANCE}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true })));
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

interface Run {
  code: number | null;
  out: string;
}

/** Reruns until the script passes (a connection just started may not be ESTABLISHED yet). */
async function waitForRun(fn: () => Promise<Run>, ms = 10_000): Promise<Run> {
  let last: Run = { code: null, out: '' };
  await waitFor('the check to pass', async () => (last = await fn()).code === 0, { timeoutMs: ms }).catch(
    () => undefined,
  );
  expect(last.code, last.out).toBe(0);
  return last;
}

describe('check scripts in the busybox demo image', () => {
  let id = '';
  let port = 0;
  let closedPort = 0;
  let sockDir = '';
  let sockServer: net.Server;

  const run = async (...argv: string[]): Promise<Run> => {
    const r = await runExec(docker, id, { argv, timeoutMs: 15_000, maxOutputBytes: 4096 }, log);
    return { code: r.exitCode, out: r.output.trim() };
  };

  beforeAll(async () => {
    await removeOurs();
    port = await freePort();
    closedPort = await freePort();
    sockDir = mkdtempSync(join(tmpdir(), 'spcd-health-sock-'));
    sockServer = net.createServer((c) => c.end());
    await new Promise<void>((r) => sockServer.listen(join(sockDir, 'api.sock'), r));
    // A stale socket file: bound, then the server closed without unlinking.
    const stale = net.createServer();
    await new Promise<void>((r) => stale.listen(join(sockDir, 'stale.sock'), r));
    const staleHandle = (stale as unknown as { _handle: { close(): void } | null })._handle;
    staleHandle?.close();

    const c = await docker.createContainer({
      Image: 'spcd-demo/service:1',
      name: `${INSTANCE}-${process.pid}`,
      Cmd: ['/usr/local/bin/demo-service', 'compute', String(port)],
      Labels: { 'spcd.instance': INSTANCE },
      HostConfig: {
        NetworkMode: 'host',
        Binds: [`${SCRIPTS}:/spcd/healthchecks:ro`, `${sockDir}:${sockDir}:ro`],
      },
    });
    id = c.id;
    await c.start();
    await waitFor(
      'httpd in the container',
      async () => (await run('/spcd/healthchecks/healthcheck_listen', 'httpd', String(port))).code === 0,
      { timeoutMs: 10_000 },
    );
    await run('sh', '-c', 'touch /tmp/fresh && touch -t 200001010000 /tmp/old');
  });

  afterAll(async () => {
    await removeOurs();
    await new Promise<void>((r) => sockServer.close(() => r()));
    rmSync(sockDir, { recursive: true, force: true });
  });

  const hc = (name: string): string => `/spcd/healthchecks/healthcheck_${name}`;

  it('healthcheck_port: an established connection of the named process, not a listener', async () => {
    // httpd only listens: Kolla's healthcheck_port meaning is not met.
    expect(await run(hc('port'), 'httpd', String(port))).toMatchObject({
      code: 1,
      out: expect.stringMatching(
        new RegExp(`^httpd \\(pid \\d+\\) has no established tcp connection on port ${port}$`),
      ),
    });
    // A client that keeps a connection to httpd open, as nova-compute does to RabbitMQ.
    await run('sh', '-c', `(sleep 60 | busybox nc 127.0.0.1 ${port} >/dev/null) >/dev/null 2>&1 &`);
    const ok = await waitForRun(() => run(hc('port'), 'busybox', String(closedPort), String(port)));
    expect(ok.out).toMatch(
      new RegExp(`^busybox \\(pid \\d+\\) has an established connection on tcp port ${closedPort} ${port}$`),
    );
    expect(await run(hc('port'), 'busybox', String(closedPort))).toMatchObject({ code: 1 });
    expect(await run(hc('port'), 'nova-compute', String(port))).toMatchObject({
      code: 1,
      out: 'no process named nova-compute',
    });
    expect((await run(hc('port'), 'httpd', 'x')).code).toBe(1);
    expect(await run(hc('port'), String(port))).toMatchObject({
      code: 1,
      out: 'usage: healthcheck_port PROCESS PORT [PORT...]',
    });
  });

  it('healthcheck_listen', async () => {
    const ok = await run(hc('listen'), 'httpd', String(port));
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(new RegExp(`^httpd \\(pid \\d+\\) listens on tcp port ${port}$`));
    expect(await run(hc('listen'), 'sleep', String(port))).toMatchObject({ code: 1 });
    expect(await run(hc('listen'), 'httpd', String(closedPort))).toMatchObject({ code: 1 });
  });

  it('healthcheck_curl (wget in busybox)', async () => {
    expect(await run(hc('curl'), `http://127.0.0.1:${port}/`)).toMatchObject({
      code: 0,
      out: `http://127.0.0.1:${port}/: HTTP 200`,
    });
    expect(await run(hc('curl'), `http://127.0.0.1:${port}/missing`)).toMatchObject({
      code: 1,
      out: `http://127.0.0.1:${port}/missing: HTTP 404`,
    });
    const down = await run(hc('curl'), `http://127.0.0.1:${closedPort}/`);
    expect(down.code).toBe(1);
    expect(down.out).toMatch(/no answer/);
  });

  it('healthcheck_process', async () => {
    expect(await run(hc('process'), 'httpd')).toMatchObject({ code: 0 });
    expect(await run(hc('process'), 'nova-compute')).toMatchObject({
      code: 1,
      out: 'no live process named nova-compute',
    });
  });

  it('healthcheck_filemod', async () => {
    expect((await run(hc('filemod'), '/tmp/fresh', '60')).code).toBe(0);
    expect(await run(hc('filemod'), '/tmp/old', '60')).toMatchObject({ code: 1 });
    expect(await run(hc('filemod'), '/tmp/none', '60')).toMatchObject({
      code: 1,
      out: '/tmp/none: does not exist',
    });
  });

  it('healthcheck_socket (no client in busybox: /proc/net/unix)', async () => {
    const ok = await run(hc('socket'), join(sockDir, 'api.sock'));
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/listens on it \(\/proc\/net\/unix/);
    expect(await run(hc('socket'), join(sockDir, 'none.sock'))).toMatchObject({ code: 1 });
    expect(await run(hc('socket'), '/etc/passwd')).toMatchObject({
      code: 1,
      out: '/etc/passwd: not a unix socket',
    });
  });
});

describe('check scripts on the Debian host (dash, coreutils, curl, python3)', () => {
  let server: http.Server;
  let port = 0;
  let closedPort = 0;
  let dir = '';
  let sockServer: net.Server;

  const run = (...argv: string[]): Promise<Run> =>
    new Promise((resolveRun) => {
      const [script, ...args] = argv;
      execFile(
        '/bin/sh',
        [join(SCRIPTS, `healthcheck_${script}`), ...args],
        { timeout: 15_000 },
        (err, stdout) => {
          const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
          resolveRun({ code: typeof code === 'number' ? code : null, out: stdout.trim() });
        },
      );
    });

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      res.statusCode = req.url === '/' ? 200 : req.url === '/moved' ? 302 : 500;
      if (res.statusCode === 302) res.setHeader('location', '/');
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    closedPort = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'spcd-health-host-'));
    sockServer = net.createServer((c) => c.end());
    await new Promise<void>((r) => sockServer.listen(join(dir, 'api.sock'), r));
    const stale = net.createServer();
    await new Promise<void>((r) => stale.listen(join(dir, 'stale.sock'), r));
    (stale as unknown as { _handle: { close(): void } | null })._handle?.close();
    writeFileSync(join(dir, 'beat'), 'x');
    writeFileSync(join(dir, 'old'), 'x');
    utimesSync(join(dir, 'old'), new Date('2000-01-01'), new Date('2000-01-01'));
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await new Promise<void>((r) => sockServer.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('port, listen and process', async () => {
    const comm = (await import('node:fs')).readFileSync('/proc/self/comm', 'utf8').trim();
    expect(await run('port', comm, String(port))).toMatchObject({ code: 1 });
    const client = net.connect(port, '127.0.0.1');
    await new Promise((r) => client.once('connect', r));
    try {
      await waitForRun(() => run('port', comm, String(port)));
      expect(await run('port', comm, String(closedPort))).toMatchObject({ code: 1 });
    } finally {
      client.destroy();
    }
    expect((await run('listen', comm, String(port))).code).toBe(0);
    expect((await run('listen', 'no-such-proc', String(port))).code).toBe(1);
    expect((await run('process', comm)).code).toBe(0);
    expect((await run('process', 'no-such-proc')).code).toBe(1);
  });

  it('curl: 2xx and 3xx pass, 5xx and no answer fail', async () => {
    expect(await run('curl', `http://127.0.0.1:${port}/`)).toMatchObject({
      code: 0,
      out: `http://127.0.0.1:${port}/: HTTP 200`,
    });
    expect(await run('curl', `http://127.0.0.1:${port}/moved`)).toMatchObject({ code: 0 });
    expect(await run('curl', `http://127.0.0.1:${port}/err`)).toMatchObject({
      code: 1,
      out: `http://127.0.0.1:${port}/err: HTTP 500`,
    });
    const down = await run('curl', `http://127.0.0.1:${closedPort}/`);
    expect(down.code).toBe(1);
    expect(down.out).toMatch(/no answer/);
  });

  it('socket: connects with a real client; a stale socket fails', async () => {
    const ok = await run('socket', join(dir, 'api.sock'));
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/accepts connections/);
    expect((await run('socket', join(dir, 'stale.sock'))).code).toBe(1);
  });

  it('filemod', async () => {
    expect((await run('filemod', join(dir, 'beat'), '60')).code).toBe(0);
    expect((await run('filemod', join(dir, 'old'), '60')).code).toBe(1);
  });
});

// A debootstrapped Debian bookworm image built by the libvirt e2e tests, when
// present: dash + coreutils, no curl/wget/python/socat/nc.
const DEBIAN_IMAGE = 'spcd-e2e/libvirt:bookworm';
const haveDebian = await docker
  .getImage(DEBIAN_IMAGE)
  .inspect()
  .then(
    () => true,
    () => false,
  );

describe.skipIf(!haveDebian)(`check scripts in the Debian image ${DEBIAN_IMAGE}`, () => {
  let id = '';
  let server: http.Server;
  let port = 0;
  let dir = '';
  let sockServer: net.Server;
  const run = async (...argv: string[]): Promise<Run> => {
    const r = await runExec(docker, id, { argv, timeoutMs: 15_000, maxOutputBytes: 4096 }, log);
    return { code: r.exitCode, out: r.output.trim() };
  };
  const hc = (name: string): string => `/spcd/healthchecks/healthcheck_${name}`;

  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    dir = mkdtempSync(join(tmpdir(), 'spcd-health-deb-'));
    sockServer = net.createServer((c) => c.end());
    await new Promise<void>((r) => sockServer.listen(join(dir, 'api.sock'), r));
    const c = await docker.createContainer({
      Image: DEBIAN_IMAGE,
      name: `${INSTANCE}-debian-${process.pid}`,
      Entrypoint: ['/bin/sleep', 'infinity'],
      Cmd: [],
      Labels: { 'spcd.instance': INSTANCE },
      HostConfig: {
        NetworkMode: 'host',
        Binds: [
          `${SCRIPTS}:/spcd/healthchecks:ro`,
          `${dir}:${dir}:ro`,
          // The image carries python3 for Kolla's runtime; hidden here, so the
          // checks run with dash and coreutils alone, as in an image without it.
          '/dev/null:/usr/bin/python3:ro',
        ],
      },
    });
    id = c.id;
    await c.start();
    await run('sh', '-c', 'touch /tmp/fresh && touch -d 2000-01-01 /tmp/old');
  });

  afterAll(async () => {
    await removeOurs();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await new Promise<void>((r) => sockServer.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('port, process, filemod and socket work with dash and coreutils alone', async () => {
    expect(await run(hc('port'), 'sleep', String(port))).toMatchObject({ code: 1 });
    expect(await run(hc('process'), 'sleep')).toMatchObject({ code: 0 });
    expect(await run(hc('process'), 'nova-compute')).toMatchObject({ code: 1 });
    expect(await run(hc('listen'), 'sleep', String(port))).toMatchObject({ code: 1 });
    expect((await run(hc('filemod'), '/tmp/fresh', '60')).code).toBe(0);
    expect((await run(hc('filemod'), '/tmp/old', '60')).code).toBe(1);
    const sock = await run(hc('socket'), join(dir, 'api.sock'));
    expect(sock.code).toBe(0);
    expect(sock.out).toMatch(/\/proc\/net\/unix/);
  });

  it('curl says plainly that the image has no HTTP client', async () => {
    expect(await run(hc('curl'), `http://127.0.0.1:${port}/`)).toMatchObject({
      code: 1,
      out: `http://127.0.0.1:${port}/: neither curl nor wget in this image`,
    });
  });
});

describe("an established check in a container with its own namespaces runs Kolla's form through exec", () => {
  let id = '';
  const exec: ExecEngine = { exec: (containerId, req) => runExec(docker, containerId, req, log) };
  const unused = (): Promise<never> => Promise.reject(new Error('a host-side probe was used'));
  const host: HostProbes = { tcp: unused, http: unused, process: unused, established: unused };
  const amqp = amqpCheck('busybox');
  const probe = (): Promise<ProbeOutcome> =>
    makeProbe(
      amqp,
      {
        name: 'x',
        containerId: id,
        pid: 0,
        network: 'none',
        pidMode: 'private',
        startedAtMs: 0,
        checks: [amqp],
      },
      exec,
      host,
    )(new AbortController().signal);
  const sh = (cmd: string): Promise<unknown> =>
    runExec(docker, id, { argv: ['sh', '-c', cmd], timeoutMs: 10_000, maxOutputBytes: 4096 }, log);

  beforeAll(async () => {
    const c = await docker.createContainer({
      Image: 'spcd-demo/service:1',
      name: `${INSTANCE}-est-${process.pid}`,
      Cmd: ['/usr/local/bin/demo-service', 'sleep'],
      Labels: { 'spcd.instance': INSTANCE },
      HostConfig: { NetworkMode: 'none', Binds: [`${SCRIPTS}:/spcd/healthchecks:ro`] },
    });
    id = c.id;
    await c.start();
    // A listener (comm "nc") on 5672 in the container's own loopback.
    await sh('(sleep 600 | nc -l -p 5672 >/dev/null) >/dev/null 2>&1 &');
  });
  afterAll(removeOurs);

  it('unhealthy with no connection, healthy while connected, unhealthy after', async () => {
    const before = await probe();
    expect(before).toMatchObject({ ok: false, exitCode: 1, output: 'no process named busybox\n' });
    await sh('sleep 600 | busybox nc 127.0.0.1 5672 >/dev/null 2>&1 & echo $! >/tmp/client.pid');
    let last: ProbeOutcome = before;
    await waitFor('the client connection', async () => (last = await probe()).ok, { timeoutMs: 10_000 });
    expect(last.output.trim()).toMatch(
      /^busybox \(pid \d+\) has an established connection on tcp port 5672$/,
    );
    await sh('kill $(cat /tmp/client.pid)');
    await waitFor('the client gone', async () => !(last = await probe()).ok, { timeoutMs: 10_000 });
    expect(last).toMatchObject({ exitCode: 1, output: 'no process named busybox\n' });
  });
});
