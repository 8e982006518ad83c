import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { canReceiveNotify, notifyReceiver, type NotifyReceiver } from '../support/notify-receiver.js';
import { SocketProxy } from '../support/socket-proxy.js';
import { waitFor } from '../support/wait.js';

/**
 * systemd's watchdog (WatchdogSec) against an engine outage longer than its
 * period: the keep-alive says the reconcile loop is alive, not that the
 * engine is, so WATCHDOG=1 keeps coming while spcd waits for dockerd.
 * The engine goes away through a proxy the test cuts; the real dockerd is never touched.
 */
const WATCHDOG_MS = 6_000;
const OUTAGE_MS = 2.5 * WATCHDOG_MS;

const sb: Sandbox = sandbox('watchdog');
const n = (s: string): string => `${sb.instance}-${s}`;
const proxy = new SocketProxy(join(sb.root, 'docker.sock'));
let spcd: SpcdProcess | undefined;
let rx: NotifyReceiver | undefined;

const engineAvailable = (): boolean =>
  (
    JSON.parse(
      execFileSync('curl', ['-sf', '--unix-socket', sb.socket, 'http://spcd/v1/status'], {
        encoding: 'utf8',
      }),
    ) as { engine: { available: boolean } }
  ).engine.available;

const beats = (): number[] =>
  (rx?.messages ?? []).filter((m) => m.data.includes('WATCHDOG=1')).map((m) => m.at);

beforeAll(async () => {
  if (!canReceiveNotify) return;
  await proxy.up();
  const notifySocket = join(sb.root, 'notify.sock');
  rx = await notifyReceiver(notifySocket);
  writeSet(sb, 'w.yaml', `set: w\ncontainers:\n${demoContainerYaml(n('a'), ['stop_grace_period: 1s'])}`);
  spcd = SpcdProcess.start(sb, ['--docker-socket', proxy.path], {
    NOTIFY_SOCKET: notifySocket,
    WATCHDOG_USEC: String(WATCHDOG_MS * 1000),
  });
  await spcd.ready();
  await waitFor('a running', async () => (await inspect(n('a')))?.State.Running);
  await waitFor('READY=1 arrived', () => rx!.messages.some((m) => m.data.includes('READY=1')));
});

afterAll(async () => {
  await spcd?.stop();
  rx?.close();
  await proxy.down();
  await cleanupInstance(sb.instance);
});

describe('watchdog', () => {
  it.skipIf(!canReceiveNotify)(
    'WATCHDOG=1 keeps arriving within the period through an engine outage longer than it',
    async () => {
      await waitFor('a first keep-alive', () => beats().length > 0, { timeoutMs: WATCHDOG_MS * 2 });
      const startedAt = (await inspect(n('a')))!.State.StartedAt;
      await proxy.down();
      await waitFor('engine reported unavailable', () => !engineAvailable(), { timeoutMs: 15_000 });
      const t0 = Date.now();
      // The outage itself is the scenario: it must outlast the watchdog period.
      await waitFor('the outage outlasts the watchdog period', () => Date.now() - t0 > OUTAGE_MS, {
        timeoutMs: OUTAGE_MS * 2,
        intervalMs: 250,
      });
      expect(engineAvailable()).toBe(false);
      const t1 = Date.now();
      // Every gap between keep-alives across the outage, from the last one before it to its end.
      const all = beats();
      const before = all.filter((t) => t < t0);
      const during = all.filter((t) => t >= t0 && t <= t1);
      const series = [before[before.length - 1] ?? t0, ...during, t1];
      const gaps = series.slice(1).map((t, i) => t - series[i]!);
      expect(during.length, `keep-alives during a ${OUTAGE_MS} ms outage`).toBeGreaterThanOrEqual(3);
      expect(Math.max(...gaps), `gaps ${gaps.join(', ')} ms`).toBeLessThan(WATCHDOG_MS);
      await proxy.up();
      await waitFor('engine available again', () => engineAvailable(), { timeoutMs: 15_000 });
      expect((await inspect(n('a')))!.State.StartedAt).toBe(startedAt);
      expect(spcd!.child.exitCode).toBe(null);
    },
  );
});
