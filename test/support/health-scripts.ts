import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { expect } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { waitFor } from './wait.js';

export const INSTANCE = 'health-scripts-test';
export const SCRIPTS = resolve('healthchecks');
export const docker = new Docker({ socketPath: '/var/run/docker.sock' });
export const log = silentLogger();

export async function removeOurs(): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`spcd.instance=${INSTANCE}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true })));
}

export { freePort } from './ports.js';

export interface Run {
  code: number | null;
  out: string;
}

/** Reruns until the script passes (a connection just started may not be ESTABLISHED yet). */
export async function waitForRun(fn: () => Promise<Run>, ms = 10_000): Promise<Run> {
  let last: Run = { code: null, out: '' };
  await waitFor('the check to pass', async () => (last = await fn()).code === 0, { timeoutMs: ms }).catch(
    () => undefined,
  );
  expect(last.code, last.out).toBe(0);
  return last;
}

/**
 * A new temp directory holding api.sock, a listening server that closes each
 * connection, and (with `stale`) stale.sock: bound, then its server closed
 * without unlinking.
 */
export async function socketDir(prefix: string, stale = true): Promise<{ dir: string; server: net.Server }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const server = net.createServer((c) => c.end());
  await new Promise<void>((r) => server.listen(join(dir, 'api.sock'), r));
  if (stale) {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(join(dir, 'stale.sock'), r));
    (s as unknown as { _handle: { close(): void } | null })._handle?.close();
  }
  return { dir, server };
}
