/**
 * The shipped check scripts (healthchecks/healthcheck_*), run for real:
 * inside the busybox demo image through spcd's own exec path, and Kolla's
 * established check in a container with its own namespaces.
 */
import { rmSync } from 'node:fs';
import type net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExec } from '../../agent/engine/exec.js';
import type { ExecEngine } from '../../agent/engine/types.js';
import { makeProbe } from '../../agent/health/probe.js';
import type { HostProbes, ProbeOutcome } from '../../agent/health/types.js';
import { amqpCheck } from '../support/spec.js';
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
import { waitFor } from '../support/wait.js';

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
    ({ dir: sockDir, server: sockServer } = await socketDir('spcd-health-sock-'));

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
