import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, serveOnTempSocket } from '../support/api-http.js';
import { waitFor } from '../support/wait.js';

let cleanup: (() => Promise<void>) | null = null;
afterEach(async () => {
  await cleanup?.();
  cleanup = null;
});

async function setup(heartbeatMs = 15_000) {
  const status = new FakeStatus();
  const actions = new FakeActions(status);
  const handler = createApiHandler({
    status,
    actions,
    log: silentLogger(),
    version: 'x',
    limits: { heartbeatMs },
  });
  const srv = await serveOnTempSocket(handler);
  cleanup = srv.close;
  return { status, actions, sock: srv.socketPath };
}

/** Opens a stream; collects text; `until` resolves when the predicate holds or rejects at the deadline. */
function openStream(sock: string, path: string) {
  let text = '';
  let statusCode = 0;
  let contentType = '';
  let ended = false;
  const waiters: (() => void)[] = [];
  const req = request({ socketPath: sock, path }, (res) => {
    statusCode = res.statusCode ?? 0;
    contentType = String(res.headers['content-type']);
    res.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      waiters.forEach((w) => w());
    });
    res.on('end', () => {
      ended = true;
      waiters.forEach((w) => w());
    });
    waiters.forEach((w) => w());
  });
  req.on('error', () => undefined);
  req.end();
  const until = (pred: () => boolean, ms = 3_000): Promise<void> =>
    new Promise((resolve, reject) => {
      if (pred()) return resolve();
      // eslint-disable-next-line no-restricted-syntax -- a deadline for an event, not a sleep
      const t = setTimeout(() => reject(new Error(`timed out; got ${JSON.stringify(text)}`)), ms);
      waiters.push(() => {
        if (pred()) {
          clearTimeout(t);
          resolve();
        }
      });
    });
  return {
    until,
    get text() {
      return text;
    },
    get status() {
      return statusCode;
    },
    get contentType() {
      return contentType;
    },
    get ended() {
      return ended;
    },
    close: () => req.destroy(),
  };
}

describe('GET /v1/events', () => {
  it('streams events as JSON lines and unsubscribes when the client leaves', async () => {
    const { status, actions, sock } = await setup();
    const s = openStream(sock, '/v1/events');
    await waitFor('the stream subscribed', () => status.bus.size === 1);
    await s.until(() => s.status === 200);
    expect(s.contentType).toMatch(/application\/x-ndjson/);
    const ref = (await call(sock, 'POST', '/v1/containers/cron/upgrade', { image: 'a/b:2' })).json() as never;
    actions.finish(ref, true);
    await s.until(() => s.text.includes('"succeeded"'));
    const lines = s.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string });
    expect(lines.map((l) => l.type)).toEqual(['operation', 'pull-progress', 'upgrade-step', 'operation']);
    s.close();
    await waitFor('the stream unsubscribed', () => status.bus.size === 0);
  });

  it('sends heartbeats on an idle stream', async () => {
    const { sock } = await setup(50);
    const s = openStream(sock, '/v1/events');
    await s.until(() => s.text.split('\n').filter((l) => l.includes('"heartbeat"')).length >= 2);
    const hb = JSON.parse(s.text.split('\n')[0] as string) as { type: string; at: number };
    expect(hb.type).toBe('heartbeat');
    expect(typeof hb.at).toBe('number');
    s.close();
  });
});

describe('GET /v1/containers/{name}/logs', () => {
  it('answers the tail as text lines and ends', async () => {
    const { sock } = await setup();
    const a = await call(sock, 'GET', '/v1/containers/cron/logs?tail=2');
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toMatch(/text\/plain/);
    expect(a.text).toBe('line 2\nline 3\n');
  });

  it('follows, and stops the source when the client leaves', async () => {
    const { status, sock } = await setup();
    const s = openStream(sock, '/v1/containers/cron/logs?tail=1&follow=1');
    await s.until(() => s.text === 'line 3\n');
    await waitFor('a log follower', () => status.follower !== null);
    status.follower?.push('line 4');
    await s.until(() => s.text.endsWith('line 4\n'));
    s.close();
    await waitFor('the log follower stopped', () => status.follower?.stopped === true);
  });

  it('follow ends when the source ends', async () => {
    const { status, sock } = await setup();
    const s = openStream(sock, '/v1/containers/cron/logs?follow=1');
    await waitFor('a log follower', () => status.follower !== null);
    status.follower?.end();
    await s.until(() => s.ended);
    expect(s.text).toBe('line 1\nline 2\nline 3\n');
  });

  it('an unknown container is a 404 before streaming', async () => {
    const { sock } = await setup();
    const a = await call(sock, 'GET', '/v1/containers/ghost/logs');
    expect(a.status).toBe(404);
    expect((a.json() as { code: string }).code).toBe('NOT_FOUND');
  });
});
