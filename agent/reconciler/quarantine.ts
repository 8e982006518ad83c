import { toSpcdError, type SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import { stateWriteOf, type QuarantinedEntry } from '../executor/recover.js';
import type { Quarantined } from '../planner/types.js';
import type { Journal } from '../state/journal.js';

export interface Quarantine extends QuarantinedEntry {
  /** When it was quarantined (or its reason last changed), on the injected clock. */
  readonly at: number;
}

/**
 * The containers whose journal entry is unresolved. Each is left alone by
 * the planner (a Quarantined) and shown as `quarantined` with
 * RECOVERY_QUARANTINED; every other container is supervised as usual.
 * Entering and leaving is logged and published as a `state` event.
 */
export class QuarantineBook {
  private readonly entries = new Map<string, Quarantine>();

  constructor(private readonly deps: { events: EventBus; log: Logger; clock: Clock }) {}

  add(q: QuarantinedEntry): void {
    const was = this.entries.get(q.container);
    if (was && was.reason === q.reason) return;
    const at = this.deps.clock.now();
    this.entries.set(q.container, { ...q, at });
    this.deps.log.error(
      { container: q.container, file: q.file, code: 'RECOVERY_QUARANTINED', reason: q.reason },
      q.stateWrite
        ? 'container quarantined: its journal entry could not be finished or undone because the state directory took no write; spcd leaves it alone and tries again by itself, with backoff'
        : 'container quarantined: its journal entry could not be finished or undone; spcd leaves it alone until an operator clears it',
    );
    this.deps.events.publish({
      type: 'state',
      at,
      container: q.container,
      from: was ? 'quarantined' : 'unknown',
      to: 'quarantined',
      reason: `RECOVERY_QUARANTINED: ${q.reason} (${q.file})`,
    });
  }

  clear(container: string, why: string): void {
    if (!this.entries.delete(container)) return;
    this.deps.log.warn({ container, reason: why }, 'quarantine cleared');
    this.deps.events.publish({
      type: 'state',
      at: this.deps.clock.now(),
      container,
      from: 'quarantined',
      to: 'recovered',
      reason: why,
    });
  }

  /** An operation that failed and left its journal entry (a rollback that could not finish) quarantines its container. */
  async afterFailure(name: string, e: SpcdError, journal: Pick<Journal, 'fileOf' | 'read'>): Promise<void> {
    if (this.get(name)) return;
    const file = journal.fileOf(name);
    try {
      const entry = await journal.read(name);
      if (entry)
        this.add({ container: name, file, reason: `${e.code}: ${e.message}`, entry, ...stateWriteOf(e) });
    } catch (err) {
      this.add({
        container: name,
        file,
        reason: `malformed journal entry: ${toSpcdError(err).message}`,
        entry: undefined,
      });
    }
  }

  get(container: string): Quarantine | undefined {
    return this.entries.get(container);
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  /** The planner's view: one entry per quarantined container. */
  quarantined(): Map<string, Quarantined> {
    const m = new Map<string, Quarantined>();
    for (const [name, q] of this.entries) m.set(name, { reason: `quarantined: ${q.reason}` });
    return m;
  }
}
