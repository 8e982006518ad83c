/** A tiny HTTP client over a unix socket, and a server on a temp socket, for API tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiHandler } from '../../agent/api/handler.js';
import { lineSplitter } from '../../agent/engine/lines.js';
import { compileLimits, type ApiLimits } from '../../agent/api/limits.js';
import { makeServer } from '../../agent/api/socket.js';
import { apiContract } from './api-contract.js';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: () => unknown;
}

/**
 * One request; the answer is checked against the OpenAPI document
 * (test/support/api-contract.ts) and the call rejects when it does not match.
 */
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
          const status = res.statusCode ?? 0;
          try {
            apiContract().check({
              method,
              path,
              requestBody: payload,
              status,
              contentType: res.headers['content-type'],
              text,
            });
          } catch (err) {
            reject(err as Error);
            return;
          }
          resolve({ status, headers: res.headers, text, json: () => JSON.parse(text) });
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

export interface EventsTap {
  /** Every line read so far, parsed (heartbeats included). */
  readonly events: Record<string, unknown>[];
  close(): void;
}

/**
 * Follows GET /v1/events; each line is checked against the document's
 * EventLine schema (a mismatch is kept in `problems` and thrown by close()).
 */
export function openEvents(socketPath: string): Promise<EventsTap & { problems: string[] }> {
  const events: Record<string, unknown>[] = [];
  const problems: string[] = [];
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: 'GET', path: '/v1/events' }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`/v1/events answered ${res.statusCode}`));
      // Cut as the engine cuts Docker's event stream (agent/engine/lines.ts).
      res.on(
        'data',
        lineSplitter((line) => {
          try {
            apiContract().checkEventLine(line);
          } catch (err) {
            problems.push((err as Error).message);
          }
          try {
            events.push(JSON.parse(line) as Record<string, unknown>);
          } catch {
            problems.push(`not JSON: ${line.slice(0, 200)}`);
          }
        }),
      );
      res.on('error', () => undefined);
      resolve({
        events,
        problems,
        close: () => {
          req.destroy();
          if (problems.length > 0) throw new Error(problems.join('\n'));
        },
      });
    });
    req.on('error', reject);
    req.end();
  });
}
