/**
 * A dependency check on a real engine, through the real daemon (bin/spcd.js):
 * a `tcp` check marked `dependency: testdep` on a closed loopback port fails
 * again and again, and the container is neither restarted nor stopped (same
 * id, same State.StartedAt); the status, the events and the metric say the
 * dependency is down. An upgrade of a container with a liveness check and the
 * same dependency check commits during the outage. Once the test listens on
 * the port, they say it is up.
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
/** A liveness check beside the dependency check: upgraded while the dependency is down. */
const BOTH = `${sb.instance}-both`;
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

const dependencyEvents = (container = NAME): string[] =>
  (tap?.events ?? []).flatMap((e) =>
    e.type === 'dependency' && e.container === container
      ? [`${String(e.check)}:${String(e.dependency)} ${String(e.status)}`]
      : [],
  );

async function metric(container = NAME): Promise<string | undefined> {
  const a = await call(sb.socket, 'GET', '/metrics');
  return a.text.split('\n').find((l) => l.startsWith(`spcd_check_dependency_up{container="${container}"`));
}

const dependencyOf = async (container: string): Promise<string | undefined> =>
  ((await get(`/v1/containers/${container}`)).dependencies as { status: string }[] | undefined)?.[0]?.status;

beforeAll(async () => {
  // A port nothing listens on: taken and given back.
  port = await listen();
  await close();
  const check = `{name: mq, tcp: "127.0.0.1:${port}", interval: 1s, timeout: 500ms, failure_threshold: 2, dependency: testdep}`;
  const container = `{image: spcd-demo/service:1, command: [demo-service, sleep], network: host, stop_grace_period: 1s, healthchecks: [${check}]}`;
  const both = container.replace(
    'healthchecks: [',
    'healthchecks: [{name: own, process: demo-service, interval: 1s, timeout: 500ms}, ',
  );
  writeSet(sb, 'dep.yaml', `set: dep\ncontainers:\n  ${NAME}: ${container}\n  ${BOTH}: ${both}\n`);
  spcd = SpcdProcess.start(sb);
  // The event stream from before the container is created (the API listens before the first pass).
  await waitFor('the API socket', () => existsSync(sb.socket), { timeoutMs: 30_000 });
  tap = await waitFor('the event stream', () => openEvents(sb.socket), { timeoutMs: 10_000 });
  await spcd.ready();
  await waitFor(
    'both containers running',
    async () => (await inspect(NAME))?.State.Running && (await inspect(BOTH))?.State.Running,
    { timeoutMs: 30_000 },
  );
});

afterAll(async () => {
  tap?.close();
  await close();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('a dependency check on a closed port', () => {
  it(`fails ${FAILURES} times and more without a restart; the dependency reads down`, async () => {
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
  });

  it('an upgrade during the outage commits: its gate waits on the liveness check only', async () => {
    await waitFor(
      'the dependency down for the other container too',
      async () => (await dependencyOf(BOTH)) === 'down',
      {
        timeoutMs: 15_000,
        intervalMs: 200,
      },
    );
    // Its liveness check has a verdict of its own (not the dependency's): healthy.
    await waitFor(
      'the other container healthy by its liveness check',
      async () => {
        const c = await get(`/v1/containers/${BOTH}`);
        return c.health === 'healthy' && c.generation === 1;
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    const a = await call(sb.socket, 'POST', `/v1/containers/${BOTH}/upgrade`, {
      image: 'spcd-demo/service:2',
    });
    expect(a.status, a.text).toBe(202);
    const ended = await waitFor(
      'the upgrade ended',
      () => tap?.events.find((e) => e.type === 'upgrade' && e.container === BOTH),
      { timeoutMs: 60_000 },
    );
    expect(ended.outcome).toBe('succeeded');
    expect(await get(`/v1/containers/${BOTH}`)).toMatchObject({
      generation: 2,
      image: 'spcd-demo/service:2',
    });
    // The new generation's check sees the dependency still down: reported once, not again.
    await waitFor(
      'the new generation sees it down',
      async () => {
        const h = await get(`/v1/containers/${BOTH}/health`);
        return (
          (h.checks as { name: string; status: string }[]).find((c) => c.name === 'mq')?.status ===
          'unhealthy'
        );
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    expect(dependencyEvents(BOTH)).toEqual(['mq:testdep down']);
  });

  it('reads the dependency up once the port listens, without a restart', async () => {
    const before = await inspect(NAME);
    await listen(port);
    await waitFor('the dependency up', async () => (await dependencyOf(NAME)) === 'up', {
      timeoutMs: 15_000,
      intervalMs: 200,
    });
    await waitFor('the up event', () => dependencyEvents().length === 2, { timeoutMs: 5_000 });
    expect(dependencyEvents()).toEqual(['mq:testdep down', 'mq:testdep up']);
    expect(await metric()).toBe(
      `spcd_check_dependency_up{container="${NAME}",check="mq",dependency="testdep"} 1`,
    );
    const last = await inspect(NAME);
    expect(last?.Id).toBe(before?.Id);
    expect(last?.State.StartedAt).toBe(before?.State.StartedAt);
    await waitFor('the other container sees it up', () => dependencyEvents(BOTH).length === 2, {
      timeoutMs: 15_000,
    });
    expect(dependencyEvents(BOTH)).toEqual(['mq:testdep down', 'mq:testdep up']);
    expect(await metric(BOTH)).toBe(
      `spcd_check_dependency_up{container="${BOTH}",check="mq",dependency="testdep"} 1`,
    );
  });
});
