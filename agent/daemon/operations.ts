import { randomUUID } from 'node:crypto';
import { toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { OperationRef } from '../api/types.js';

/**
 * Long operations answer at once with an id; their progress and outcome go
 * out on the event bus. `begin` must have taken any lock synchronously
 * before it returns the running promise.
 */
export class Operations {
  private readonly recent: { ref: OperationRef; phase: string; error?: unknown; result?: unknown }[] = [];

  constructor(private readonly deps: { events: EventBus; clock: Clock; log: Logger }) {}

  newId(kind: string): string {
    return `${kind}-${randomUUID().slice(0, 8)}`;
  }

  /** Publishes accepted/running/succeeded/failed for a promise that is already running. */
  track(
    id: string,
    kind: string,
    target: string,
    running: Promise<Record<string, unknown> | void>,
  ): OperationRef {
    const { events, clock, log } = this.deps;
    const ref: OperationRef = {
      operationId: id,
      kind,
      target,
      acceptedAt: new Date(clock.now()).toISOString(),
    };
    const entry: { ref: OperationRef; phase: string; error?: unknown; result?: unknown } = {
      ref,
      phase: 'running',
    };
    this.recent.push(entry);
    if (this.recent.length > 200) this.recent.shift();
    events.publish({ type: 'operation', at: clock.now(), operationId: id, kind, target, phase: 'accepted' });
    running.then(
      (result) => {
        entry.phase = 'succeeded';
        entry.result = result;
        events.publish({
          type: 'operation',
          at: clock.now(),
          operationId: id,
          kind,
          target,
          phase: 'succeeded',
          ...(result ? { result } : {}),
        });
        log.info({ operationId: id, kind, target, result }, 'operation succeeded');
      },
      (err: unknown) => {
        const e = toSpcdError(err);
        entry.phase = 'failed';
        entry.error = e.toJSON();
        events.publish({
          type: 'operation',
          at: clock.now(),
          operationId: id,
          kind,
          target,
          phase: 'failed',
          error: { code: e.code, message: e.message },
        });
        log.warn({ operationId: id, kind, target, code: e.code, err: e.message }, 'operation failed');
      },
    );
    return ref;
  }

  get(id: string): { ref: OperationRef; phase: string; error?: unknown; result?: unknown } | undefined {
    return this.recent.find((e) => e.ref.operationId === id);
  }
}
