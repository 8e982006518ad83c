import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type RequestListener, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

/**
 * A stand-in Docker API on a unix socket in a temporary directory, for the
 * engine adapter's unit tests (no Docker engine). Call at the top of a test
 * file: each test's server is closed and its directory removed after it.
 */
export function standInSockets(): (handler: RequestListener) => Promise<string> {
  let server: Server | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    if (dir) await rm(dir, { recursive: true, force: true });
    server = dir = undefined;
  });
  return async (handler) => {
    dir = await mkdtemp(join(tmpdir(), 'spcd-engine-'));
    const socket = join(dir, 'docker.sock');
    const s = createServer(handler);
    server = s;
    await new Promise<void>((r) => s.listen(socket, r));
    return socket;
  };
}
