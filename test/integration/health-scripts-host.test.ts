/**
 * The shipped check scripts (healthchecks/healthcheck_*), run for real:
 * on this Debian host with /bin/sh = dash, GNU coreutils, curl and python3 (standing
 * in for a Debian image, which cannot be pulled here), and in the Debian
 * image the libvirt e2e tests build, when present.
 */
import { execFile } from 'node:child_process';
import { rmSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExec } from '../../agent/engine/exec.js';
import {
  INSTANCE,
  SCRIPTS,
  docker,
  freePort,
  log,
  removeOurs,
  socketDir,
  waitForRun,
  type Run,
} from '../support/health-scripts.js';

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
    ({ dir, server: sockServer } = await socketDir('spcd-health-host-'));
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
    ({ dir, server: sockServer } = await socketDir('spcd-health-deb-', false));
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
