import { lineSplitter } from './lines.js';
import type Dockerode from 'dockerode';
import { LABEL } from '../model/labels.js';
import { eventAction } from './dialect.js';
import type { EngineEvent, EventSubscription } from './types.js';

const ACTIONS = new Set(['start', 'die', 'stop', 'kill', 'destroy', 'create', 'oom', 'health_status']);

/**
 * Subscribes to the engine's container events for one instance. When the
 * stream ends or breaks, one 'stream-lost' event is delivered: the caller
 * re-lists; a lost stream never means "the container exited".
 */
export function subscribeEvents(
  docker: Dockerode,
  instance: string,
  onEvent: (e: EngineEvent) => void,
): EventSubscription {
  let closed = false;
  let stream: (NodeJS.ReadableStream & { destroy?: () => void }) | undefined;
  let lost = false;
  const lose = (error?: Error): void => {
    if (closed || lost) return;
    lost = true;
    onEvent({ kind: 'stream-lost', ...(error ? { error } : {}) });
  };
  docker.getEvents(
    { filters: { type: ['container'], label: [`${LABEL.instance}=${instance}`] } },
    (err: unknown, s?: NodeJS.ReadableStream) => {
      if (err || !s) {
        lose(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      stream = s as typeof stream;
      if (closed) {
        stream?.destroy?.();
        return;
      }
      s.on(
        'data',
        lineSplitter((line) => {
          try {
            const ev = JSON.parse(line) as {
              Action?: string;
              id?: string;
              timeNano?: number;
              Actor?: { Attributes?: Record<string, string> };
            };
            const action = eventAction(ev.Action);
            if (!ACTIONS.has(action) || !ev.id) return;
            const attrs = ev.Actor?.Attributes ?? {};
            const exit = attrs.exitCode;
            onEvent({
              kind: 'container',
              action: action as 'start',
              id: ev.id,
              name: attrs.name ?? '',
              labels: attrs,
              ...(exit !== undefined ? { exitCode: Number(exit) } : {}),
              timeNano: ev.timeNano ?? 0,
            });
          } catch {
            // a malformed line is skipped; the periodic re-list covers anything missed
          }
        }),
      );
      s.on('end', () => lose());
      s.on('close', () => lose());
      s.on('error', (e: Error) => lose(e));
    },
  );
  return {
    close() {
      closed = true;
      stream?.destroy?.();
    },
  };
}
