import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { SocketProxy } from '../support/socket-proxy.js';
import { waitFor } from '../support/wait.js';

/**
 * Start-up and shutdown of a real spcd: whatever point start-up reaches, a
 * failure or a SIGTERM closes what was opened; one spcd per state directory.
 */
const running: SpcdProcess[] = [];
const sandboxes: Sandbox[] = [];
const start = (sb: Sandbox, extra: string[] = []): SpcdProcess => {
  const p = SpcdProcess.start(sb, extra);
  running.push(p);
  return p;
};
const fresh = (prefix: string): Sandbox => {
  const sb = sandbox(prefix);
  sandboxes.push(sb);
  return sb;
};
/** An engine socket nobody listens on: spcd waits for the engine. */
const noEngine = (sb: Sandbox): string[] => ['--docker-socket', join(sb.root, 'no-docker.sock')];

/** Host PIDs of live `sleep 3607` processes in a container (the check below). */
function checkSleeps(containerId: string): number[] {
  const out: number[] = [];
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue;
    try {
      if (readFileSync(`/proc/${ent}/cmdline`, 'utf8') !== 'sleep\u00003607\u0000') continue;
      if (readFileSync(`/proc/${ent}/stat`, 'utf8').split(') ')[1]?.[0] === 'Z') continue;
      if (readFileSync(`/proc/${ent}/cgroup`, 'utf8').includes(containerId)) out.push(Number(ent));
    } catch {
      /* exited while we looked */
    }
  }
  return out;
}

afterEach(async () => {
  for (const p of running.splice(0)) await p.kill9();
  for (const sb of sandboxes.splice(0)) await cleanupInstance(sb.instance);
});

describe('spcd start-up and shutdown', () => {
  it('SIGTERM while it waits for an unreachable engine: exits promptly, the socket and the lock gone', async () => {
    const sb = fresh('life-term');
    const spcd = start(sb, noEngine(sb));
    // The API opens just before the wait for the engine begins.
    await waitFor('API listening', () => spcd.logged('"API listening"') || spcd.child.exitCode !== null);
    expect(spcd.logged('"spcd ready"')).toBe(false);
    const t0 = Date.now();
    spcd.child.kill('SIGTERM');
    const code = await spcd.exitWithin(20_000);
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(existsSync(sb.socket)).toBe(false);
    expect(existsSync(join(sb.stateDir, 'spcd.lock'))).toBe(false);
  });

  it('a start-up failure after the API is open: exits non-zero with a clear message, socket closed', async () => {
    const sb = fresh('life-fail');
    writeSet(sb, 'e.yaml', 'set: e\ncontainers: {}\n');
    // Start-up waits for an engine nobody serves yet, with the API open. Meanwhile the
    // journal directory is replaced by a file: recovery cannot even list it (a broken
    // install, not one container's state), so start-up must fail, and close what it opened.
    const engine = new SocketProxy(join(sb.root, 'no-docker.sock'));
    const spcd = start(sb, noEngine(sb));
    await waitFor('API listening', () => spcd.logged('"API listening"') || spcd.child.exitCode !== null);
    rmSync(join(sb.stateDir, 'journal'), { recursive: true, force: true });
    writeFileSync(join(sb.stateDir, 'journal'), 'not a directory\n');
    await engine.up();
    try {
      const code = await spcd.exitWithin(30_000);
      expect(code).toBe(1);
    } finally {
      await engine.down();
    }
    expect(spcd.output.some((l) => l.startsWith('spcd: cannot start (converge):'))).toBe(true);
    expect(existsSync(sb.socket)).toBe(false);
    expect(existsSync(join(sb.stateDir, 'spcd.lock'))).toBe(false);
  });

  it('a second spcd on the same state directory refuses, naming the directory and the holder', async () => {
    const sb = fresh('life-lock');
    const first = start(sb, noEngine(sb));
    await waitFor('first listening', () => first.logged('"API listening"') || first.child.exitCode !== null);
    const other = { ...sb, socket: join(sb.root, 'run2', 'spcd.sock') };
    const second = start(other, noEngine(sb));
    expect(await second.exitWithin(30_000)).toBe(1);
    const line = second.output.find((l) => l.includes('STATE_LOCKED'));
    expect(line).toContain(sb.stateDir);
    expect(line).toContain(`PID ${first.child.pid}`);
    expect(existsSync(other.socket)).toBe(false);
    // The first is untouched: still serving, still the lock's owner.
    expect(first.child.exitCode).toBe(null);
    expect(existsSync(sb.socket)).toBe(true);
    expect(JSON.parse(readFileSync(join(sb.stateDir, 'spcd.lock'), 'utf8')).pid).toBe(first.child.pid);
  });

  it('a lock left by a SIGKILLed spcd does not block its restart', async () => {
    const sb = fresh('life-stale');
    const first = start(sb, noEngine(sb));
    await waitFor('first listening', () => first.logged('"API listening"') || first.child.exitCode !== null);
    await first.kill9();
    expect(existsSync(join(sb.stateDir, 'spcd.lock'))).toBe(true);
    const again = start(sb, noEngine(sb));
    await waitFor(
      'restarted spcd listening',
      () => again.logged('"API listening"') || again.child.exitCode !== null,
    );
    expect(again.child.exitCode).toBe(null);
    expect(JSON.parse(readFileSync(join(sb.stateDir, 'spcd.lock'), 'utf8')).pid).toBe(again.child.pid);
  });

  it('SIGTERM while a check runs: its exec is killed before spcd exits', async () => {
    const sb = fresh('life-exec');
    const name = `${sb.instance}-c`;
    writeSet(
      sb,
      'c.yaml',
      `set: c\ncontainers:\n${demoContainerYaml(name, ['stop_grace_period: 1s'])}    healthchecks:\n      - name: slow\n        exec: [sleep, '3607']\n        interval: 20s\n        timeout: 15s\n        action: none\n`,
    );
    const spcd = start(sb);
    await spcd.ready();
    const id = await waitFor('c running', async () => {
      const c = await inspect(name);
      return c?.State.Running ? c.Id : undefined;
    });
    await waitFor('the check is in flight', () => checkSleeps(id).length > 0);
    spcd.child.kill('SIGTERM');
    expect(await spcd.exitWithin(30_000)).toBe(0);
    expect(checkSleeps(id)).toEqual([]);
    expect((await inspect(name))?.State.Running).toBe(true);
  });
});
