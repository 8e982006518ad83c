/**
 * A dependency check on a real engine, through the real daemon (bin/spcd.js):
 * a `tcp` check marked `dependency: testdep` on a closed loopback port fails
 * again and again, and the container is neither restarted nor stopped (same
 * id, same State.StartedAt); the status, the events and the metric say the
 * dependency is down. Once the test listens on the port, they say it is up.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, openEvents, type EventsTap } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('depcheck');
const NAME = `${sb.instance}-mq-user`;
const FAILURES = 5;

let spcd: SpcdProcess | undefined;
let tap: (EventsTap & { problems: string[] }) | undefined;
let listener: Server | undefined;
let port = 0;

/** Listens on 127.0.0.1 (on `at`, or a free port); resolves with the port. */
function listen(at = 0): Promise<number> {
  const server = createServer((socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(at, '127.0.0.1', () => {
      listener = server;
      resolve((server.address() as { port: number }).port);
    });
  });
}

function close(): Promise<void> {
  const server = listener;
  listener = undefined;
  return new Promise((resolve) => (server ? server.close(() => resolve()) : resolve()));
}

const get = async (path: string): Promise<Record<string, unknown>> => {
  const a = await call(sb.socket, 'GET', path);
  expect(a.status, a.text).toBe(200);
  return a.json() as Record<string, unknown>;
};

const dependencyEvents = (): string[] =>
  (tap?.events ?? []).flatMap((e) =>
    e.type === 'dependency' && e.container === NAME
      ? [`${e.check}:${String(e.dependency)} ${String(e.status)}`]
      : [],
  );

async function metric(): Promise<string | undefined> {
  const a = await call(sb.socket, 'GET', '/metrics');
  return a.text.split('\n').find((l) => l.startsWith(`spcd_check_dependency_up{container="${NAME}"`));
}

beforeAll(async () => {
  // A port nothing listens on: taken and given back.
  port = await listen();
  await close();
  const check = `{name: mq, tcp: "127.0.0.1:${port}", interval: 1s, timeout: 500ms, failure_threshold: 2, dependency: testdep}`;
  const container = `{image: spcd-demo/service:1, command: [demo-service, sleep], network: host, stop_grace_period: 1s, healthchecks: [${check}]}`;
  writeSet(sb, 'dep.yaml', `set: dep\ncontainers:\n  ${NAME}: ${container}\n`);
  spcd = SpcdProcess.start(sb);
  // The event stream from before the container is created (the API listens before the first pass).
  await waitFor('the API socket', () => existsSync(sb.socket), { timeoutMs: 30_000 });
  tap = await waitFor('the event stream', () => openEvents(sb.socket), { timeoutMs: 10_000 });
  await spcd.ready();
  await waitFor('the container running', async () => (await inspect(NAME))?.State.Running, {
    timeoutMs: 30_000,
  });
});

afterAll(async () => {
  tap?.close();
  await close();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('a dependency check on a closed port', () => {
  it(`fails ${FAILURES} times and more without a restart; the dependency reads down, then up once the port listens`, async () => {
    const before = await inspect(NAME);
    expect(before?.State.Running).toBe(true);
    const failures = async (): Promise<number> => {
      const h = await get(`/v1/containers/${NAME}/health`);
      expect(h.status).toBe('none');
      const checks = h.checks as { name: string; consecutiveFailures: number; dependency?: string }[];
      const mq = checks.find((c) => c.name === 'mq');
      expect(mq?.dependency).toBe('testdep');
      return mq?.consecutiveFailures ?? 0;
    };
    await waitFor(`the check failed ${FAILURES} times in a row`, async () => (await failures()) >= FAILURES, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });

    const after = await inspect(NAME);
    expect(after?.Id).toBe(before?.Id);
    expect(after?.State.StartedAt).toBe(before?.State.StartedAt);
    expect(after?.State.Running).toBe(true);
    const status = await get(`/v1/containers/${NAME}`);
    expect(status).toMatchObject({
      state: 'running',
      health: 'none',
      restartCount: 0,
      dependencies: [{ check: 'mq', dependency: 'testdep', status: 'down' }],
    });
    expect(dependencyEvents()).toEqual(['mq:testdep down']);
    expect(await metric()).toBe(
      `spcd_check_dependency_up{container="${NAME}",check="mq",dependency="testdep"} 0`,
    );
    expect(spcd?.logged('restarting unhealthy container')).toBe(false);

    await listen(port);
    await waitFor(
      'the dependency up',
      async () => {
        const s = await get(`/v1/containers/${NAME}`);
        return (s.dependencies as { status: string }[] | undefined)?.[0]?.status === 'up';
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    await waitFor('the up event', () => dependencyEvents().length === 2, { timeoutMs: 5_000 });
    expect(dependencyEvents()).toEqual(['mq:testdep down', 'mq:testdep up']);
    expect(await metric()).toBe(
      `spcd_check_dependency_up{container="${NAME}",check="mq",dependency="testdep"} 1`,
    );
    const last = await inspect(NAME);
    expect(last?.Id).toBe(before?.Id);
    expect(last?.State.StartedAt).toBe(before?.State.StartedAt);
  });
});
