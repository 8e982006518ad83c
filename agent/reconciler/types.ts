import type { Logger } from '../log.js';
import type { BackoffPolicy } from '../model/backoff.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerEngine, EventEngine } from '../engine/types.js';
import type { DesiredContainer } from '../planner/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import type { HealthSync } from './health-sync.js';
import type { LedgerEntry } from './ledger.js';
import type { LockingOperation } from './locks.js';
import type { Operations } from './operations.js';

export type Lifecycle = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** One container's facts as the status view reads them: its ledger entry and what has it locked. */
export interface ContainerFacts extends LedgerEntry {
  readonly operation: LockingOperation | null;
}

export interface ReconcilerDeps {
  readonly engine: ContainerEngine & EventEngine;
  readonly exec: ExecutorDeps;
  /** The only owner of health watches; the executor's health gate is the same object. */
  readonly health: HealthSync;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly instance: string;
  readonly relistMs: number;
  readonly backoff?: BackoffPolicy;
  /**
   * The watchdog's proof of life: called after every pass that ran to its
   * end, including one that found the engine away (the loop is alive, waiting
   * for it). A loop that stops passing stops calling it.
   */
  readonly onHeartbeat?: () => void;
  /** The owner of operations (one of its own, over these events, clock and log, when not given). */
  readonly operations?: Operations;
  /** How long stop() waits for the pass in flight and its steps (STOP_DEADLINE_MS by default). */
  readonly stopDeadlineMs?: number;
}

/**
 * The definitions could not be read: keep what runs and restart what exits,
 * nothing else (no create, no replace, no remove). `derive` gives the
 * containers to keep from what the engine shows.
 */
export interface Keep {
  readonly reason: string;
  readonly derive: (observed: readonly ObservedContainer[]) => DesiredContainer[];
}
