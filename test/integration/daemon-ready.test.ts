import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, type Sandbox } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';

/**
 * The test helper every daemon test starts with (test/support/daemon.ts):
 * readyOrExit resolves once spcd is ready, and a spcd that dies at start-up
 * fails it at once with its exit code and output, not at the deadline.
 */
const sandboxes: Sandbox[] = [];
const running: SpcdProcess[] = [];
const fresh = (prefix: string): Sandbox => {
  const sb = sandbox(prefix);
  sandboxes.push(sb);
  return sb;
};

afterAll(async () => {
  for (const p of running) await p.kill9();
  for (const sb of sandboxes) rmSync(sb.root, { recursive: true, force: true });
});

describe('SpcdProcess.readyOrExit', () => {
  it('a spcd that exits at start-up fails it at once, with the exit code and the tail of its output', async () => {
    const sb = fresh('ready-exit');
    // A state directory that is a file: spcd cannot take its lock and exits 1.
    writeFileSync(sb.stateDir, 'not a directory\n');
    const p = SpcdProcess.start(sb, ['--docker-socket', join(sb.root, 'no-docker.sock')]);
    running.push(p);
    const deadline = 120_000;
    const t0 = Date.now();
    const err = await p.readyOrExit(deadline).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    const took = Date.now() - t0;
    expect(err).toBeInstanceOf(Error);
    expect(err?.message).toMatch(/^spcd exited 1 before it was ready:\n/);
    // The tail is spcd's own output, complete up to its last line.
    expect(err?.message).toContain('spcd: cannot start (state-lock)');
    expect(err?.message).toContain(sb.stateDir);
    expect(err?.message).toContain('cannot start; everything opened is closed');
    // At once: far from the deadline (a poll that swallowed the exit would wait all of it).
    expect(took).toBeLessThan(deadline / 4);
    expect(await p.wait()).toBe(1);
  });

  it('a spcd killed before it is ready names the signal', async () => {
    const sb = fresh('ready-kill');
    // No engine: spcd waits for it and never becomes ready on its own.
    const p = SpcdProcess.start(sb, ['--docker-socket', join(sb.root, 'no-docker.sock')]);
    running.push(p);
    const pending = p.readyOrExit(120_000).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    p.child.kill('SIGKILL');
    const err = await pending;
    expect(err?.message).toMatch(/^spcd exited SIGKILL before it was ready/);
  });

  it('a spcd that converges resolves it, and keeps running', async () => {
    const sb = fresh('ready-ok');
    const p = SpcdProcess.start(sb);
    running.push(p);
    await p.readyOrExit(60_000);
    expect(p.logged('"spcd ready"')).toBe(true);
    expect(p.child.exitCode).toBeNull();
    expect(await p.stop()).toBe(0);
  });

  it('exitWithin gives the exit code, or says it still runs', async () => {
    const sb = fresh('ready-within');
    const p = SpcdProcess.start(sb, ['--docker-socket', join(sb.root, 'no-docker.sock')]);
    running.push(p);
    // Once its signal handlers are in place (it listens), a SIGTERM ends it with 0.
    await waitFor('spcd listening', () => p.logged('"API listening"'));
    expect(await p.exitWithin(300)).toBe('still running');
    p.child.kill('SIGTERM');
    expect(await p.exitWithin(30_000)).toBe(0);
  });
});
