/** The streamed routes: /v1/events (newline-delimited JSON) and container logs (text lines). */
import { SpcdError } from '../../errors.js';
import type { SpcdEvent } from '../../model/events.js';
import type { Route, RouteContext, RouteResult } from '../context.js';
import { ref } from '../openapi/schema.js';
import { queryBool, queryInt } from '../validate.js';
import { CONTAINER_PARAM } from './reads.js';

export const MAX_TAIL = 10_000;
/** ?tail: the schema the document shows is the one the handler enforces. */
const TAIL = { type: 'integer', minimum: 0, maximum: MAX_TAIL, default: 100 } as const;

/**
 * Every SpcdEvent as one JSON line, plus `{"type":"heartbeat","at":...}` every
 * heartbeatMs so idle clients and proxies notice a dead peer. A client that
 * falls more than streamBacklogBytes behind is dropped rather than buffered
 * without end. The subscription ends when the client goes away.
 */
async function getEvents(ctx: RouteContext): Promise<RouteResult> {
  const { res, limits } = ctx;
  const leave = ctx.streams.admit(res, limits.streamBacklogBytes);
  res.writeHead(200, {
    'content-type': 'application/x-ndjson; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.flushHeaders();
  ctx.streamStarted(200);
  let closed = false;
  const write = (e: SpcdEvent | { type: 'heartbeat'; at: number }): void => {
    if (closed) return;
    if (res.writableLength > limits.streamBacklogBytes || ctx.streams.over()) {
      ctx.deps.log.warn(
        { backlog: res.writableLength, allStreams: ctx.streams.held(), code: 'STREAM_BUDGET_FULL' },
        'events client too slow; dropping it',
      );
      cleanup();
      res.destroy();
      return;
    }
    res.write(JSON.stringify(e) + '\n');
  };
  const unsubscribe = ctx.deps.status.subscribe(write);
  const heartbeat = setInterval(() => write({ type: 'heartbeat', at: Date.now() }), limits.heartbeatMs);
  const cleanup = (): void => {
    if (closed) return;
    closed = true;
    leave();
    clearInterval(heartbeat);
    unsubscribe();
  };
  res.on('close', cleanup);
  return { kind: 'streamed' };
}

/**
 * `?tail=N` (default 100, at most 10000) lines, then with `?follow=1` new
 * lines as they come. An unknown container answers 404 before anything is
 * streamed; an error after the stream began ends it with a last line
 * "spcd: CODE: message".
 */
async function getLogs(ctx: RouteContext): Promise<RouteResult> {
  const { res, deps, limits } = ctx;
  const name = ctx.params.name ?? '';
  const tail = queryInt(ctx.query, 'tail', TAIL.default, TAIL.minimum, TAIL.maximum);
  const follow = queryBool(ctx.query, 'follow');
  if (!deps.status.container(name))
    throw new SpcdError('NOT_FOUND', `no container named ${name}`, { container: name });
  const backlogCap = limits.streamBacklogBytes * 16;
  const leave = ctx.streams.admit(res, backlogCap);
  res.writeHead(200, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.flushHeaders();
  ctx.streamStarted(200);
  let closed = false;
  let stop: (() => void) | null = null;
  const finish = (): void => {
    if (closed) return;
    closed = true;
    leave();
    stop?.();
  };
  res.on('close', finish);
  try {
    stop = await deps.status.logs(name, {
      tail,
      follow,
      onLine: (line) => {
        if (closed) return;
        // Its own cap, and the one of all streams together (a client that never reads holds memory).
        if (res.writableLength > backlogCap || ctx.streams.over()) {
          deps.log.warn(
            {
              container: name,
              backlog: res.writableLength,
              allStreams: ctx.streams.held(),
              code: 'STREAM_BUDGET_FULL',
            },
            'logs client too slow; dropping it',
          );
          res.destroy();
          return;
        }
        res.write(line.endsWith('\n') ? line : line + '\n');
      },
      onEnd: () => {
        if (!closed) res.end();
      },
    });
    if (closed) stop();
  } catch (err) {
    const e =
      err instanceof SpcdError ? err : new SpcdError('INTERNAL', 'log stream failed; see the spcd log');
    if (!(err instanceof SpcdError)) deps.log.error({ err, container: name }, 'log stream failed');
    if (!closed) res.end(`spcd: ${e.code}: ${e.message}\n`);
  }
  return { kind: 'streamed' };
}

export const events: Route = {
  doc: {
    summary:
      'Every event as it happens, one JSON line each, plus a heartbeat every 15 s; never ends by itself',
    description:
      'Each line of the stream is one EventLine. Subscribe before posting an operation to see all its events.',
    responses: [
      {
        status: 200,
        description: 'the stream',
        contentType: 'application/x-ndjson',
        schema: ref('EventLine'),
      },
    ],
    errors: ['STREAM_BUDGET_FULL'],
  },
  handler: getEvents,
};

export const logs: Route = {
  doc: {
    summary: "A container's log lines, and with follow=1 new ones as they come",
    description: 'An error after the stream began ends it with a last line "spcd: CODE: message".',
    params: CONTAINER_PARAM,
    query: {
      tail: { schema: TAIL, description: 'how many of the last lines to send first' },
      follow: {
        schema: { type: 'string', enum: ['', '0', '1', 'false', 'true'] },
        description: 'keep the stream open (1, true or bare)',
      },
    },
    responses: [
      {
        status: 200,
        description: 'one line per log line',
        contentType: 'text/plain',
        schema: { type: 'string' },
      },
    ],
    errors: ['NOT_FOUND', 'UNPROCESSABLE', 'STREAM_BUDGET_FULL'],
  },
  handler: getLogs,
};
