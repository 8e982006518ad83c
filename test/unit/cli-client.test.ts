/**
 * spcctl's client against a socket that resets connections before answering
 * (spcd at its connection cap with no slot to free): a GET is tried again, a
 * POST is not.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, RESET_RETRIES } from '../../agent/cli/client.js';

let server: Server | undefined;
let dir: string | undefined;

afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  if (dir) rmSync(dir, { recursive: true, force: true });
  server = undefined;
  dir = undefined;
});

/** A socket whose first `resets` connections are closed at once; later ones get a 200 JSON answer. */
async function resetting(resets: number): Promise<{ path: string; accepted: () => number }> {
  dir = mkdtempSync(join(tmpdir(), 'spcd-cli-client-'));
  const path = join(dir, 's.sock');
  let accepted = 0;
  server = createServer((s: Socket) => {
    accepted++;
    if (accepted <= resets) {
      s.destroy();
      return;
    }
    s.once('data', () => {
      const body = '{"ok":true}';
      s.end(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
  });
  await new Promise<void>((r) => server!.listen(path, r));
  return { path, accepted: () => accepted };
}

describe('ApiClient and connection resets', () => {
  it('tries a GET again when the connection is reset before any answer', async () => {
    const s = await resetting(2);
    const answer = await new ApiClient(s.path).call('GET', '/v1/status');
    expect(answer).toEqual({ status: 200, body: { ok: true } });
    expect(s.accepted()).toBe(3);
  });

  it('gives up after RESET_RETRIES more tries, naming the request', async () => {
    const s = await resetting(100);
    await expect(new ApiClient(s.path).call('GET', '/v1/status')).rejects.toThrow(
      'spcd closed the connection before answering GET /v1/status',
    );
    expect(s.accepted()).toBe(1 + RESET_RETRIES);
  });

  it('never repeats a POST', async () => {
    const s = await resetting(1);
    await expect(new ApiClient(s.path).call('POST', '/v1/reload', {})).rejects.toThrow(
      'spcd closed the connection before answering POST /v1/reload',
    );
    expect(s.accepted()).toBe(1);
  });
});
