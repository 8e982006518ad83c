/** A tiny HTTP client over a unix socket, and a server on a temp socket, for API tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiHandler } from '../../agent/api/handler.js';
import { compileLimits, type ApiLimits } from '../../agent/api/limits.js';
import { makeServer } from '../../agent/api/socket.js';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: () => unknown;
}

export function call(
  socketPath: string,
  method: string,
  path: string,
  body?: string | object,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: {
          ...(payload !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }
            : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

export async function serveOnTempSocket(
  handler: ApiHandler,
  limits: Partial<ApiLimits> = {},
): Promise<{ socketPath: string; server: Server; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-api-'));
  const socketPath = join(dir, 'api.sock');
  const { server } = makeServer(handler, compileLimits(limits));
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
