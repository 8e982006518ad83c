import { randomUUID } from 'node:crypto';
import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { OperationBegun, OperationOutcome, OperationRef } from '../model/operation.js';

/** How many finished operations `done` still answers for, newest kept (running ones are never dropped). */
export const KEPT_FINISHED = 200;

type Result = Record<string, unknown> | void;

interface Entry {
  readonly begun: OperationBegun;
  readonly settled: Promise<OperationOutcome<SpcdError>>;
}

/**
 * The owner of operations: every operation's id, from the moment it begins
 * to its outcome, and the one way to wait for that outcome (`done`). The
 * API's operations answer at once with an id and publish their progress and
 * outcome on the event bus (`track`); a pass's own step and a set's member
 * are recorded quietly (`follow`). `track` and `follow` must be given a
 * promise that is already running (any lock taken synchronously).
 */
export class Operations {
  private readonly entries = new Map<string, Entry>();
  private readonly finished: string[] = [];
  private readonly listeners = new Set<(op: OperationBegun) => void>();

  constructor(private readonly deps: { events: EventBus; clock: Clock; log: Logger }) {}

  newId(kind: string): string {
    return `${kind}-${randomUUID().slice(0, 8)}`;
  }

  /** Publishes accepted, then succeeded or failed, for a promise that is already running. */
  track(id: string, kind: string, target: string, running: Promise<Result>): OperationRef {
    const { events, clock, log } = this.deps;
    const ref: OperationRef = {
      operationId: id,
      kind,
      target,
      acceptedAt: new Date(clock.now()).toISOString(),
    };
    const base = { type: 'operation' as const, operationId: id, kind, target };
    this.assertNew(id);
    events.publish({ ...base, at: clock.now(), phase: 'accepted' });
    // Attached before `record`'s: the outcome is on the bus before any `done` caller goes on.
    running.then(
      (result) => {
        events.publish({ ...base, at: clock.now(), phase: 'succeeded', ...(result ? { result } : {}) });
        log.info({ operationId: id, kind, target, result }, 'operation succeeded');
      },
      (err: unknown) => {
        const e = toSpcdError(err);
        events.publish({
          ...base,
          at: clock.now(),
          phase: 'failed',
          error: { code: e.code, message: e.message },
        });
        log.warn({ operationId: id, kind, target, code: e.code, err: e.message }, 'operation failed');
      },
    );
    this.record({ operationId: id, kind, target }, running);
    return ref;
  }

  /** Records an operation that publishes nothing (a pass's own step, a set's member); `done` answers for it. */
  follow(op: OperationBegun, running: Promise<Result>): void {
    this.record(op, running);
  }

  /** Tells `fn` of every operation as it begins; returns the call that stops telling. */
  onBegin(fn: (op: OperationBegun) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * The operation's outcome: resolves once it ends (at once for one that
   * ended, while it is among the last KEPT_FINISHED finished). Never rejects
   * for the operation's own failure, which is in the outcome as a typed
   * error; rejects NOT_FOUND for an id it does not know (never begun, or
   * finished and dropped since).
   */
  done(id: string): Promise<OperationOutcome<SpcdError>> {
    const e = this.entries.get(id);
    if (!e) return Promise.reject(new SpcdError('NOT_FOUND', `no operation ${id}`, { operationId: id }));
    return e.settled;
  }

  private assertNew(id: string): void {
    if (this.entries.has(id))
      throw new SpcdError('CONFLICT', `operation ${id} exists already`, { operationId: id });
  }

  private record(begun: OperationBegun, running: Promise<Result>): void {
    this.assertNew(begun.operationId);
    const settled = running.then(
      (result): OperationOutcome<SpcdError> => ({
        ...begun,
        phase: 'succeeded',
        ...(result ? { result } : {}),
      }),
      (err: unknown): OperationOutcome<SpcdError> => {
        const error = toSpcdError(err);
        return { ...begun, phase: error.code === 'SHUTTING_DOWN' ? 'cancelled' : 'failed', error };
      },
    );
    const entry: Entry = { begun, settled };
    this.entries.set(begun.operationId, entry);
    void settled.then(() => this.finish(entry));
    for (const fn of this.listeners) fn(begun);
  }

  private finish(entry: Entry): void {
    this.finished.push(entry.begun.operationId);
    while (this.finished.length > KEPT_FINISHED) this.entries.delete(this.finished.shift()!);
  }
}
