import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';

/**
 * How long Reconciler.stop() waits for the pass in flight and the steps it
 * runs. systemd gives the whole stop 150 s (TimeoutStopSec); the components
 * stopped after the reconciler (API, definitions, health checks, the state
 * lock) take well under a second, so 120 s leaves room for them and for a
 * fleet integration's own wait. See docs/decisions/0030-reconciler-shutdown.md.
 */
export const STOP_DEADLINE_MS = 120_000;

export interface ShutdownWait {
  readonly clock: Clock;
  readonly log: Logger;
  readonly deadlineMs: number;
  /** Resolves when no pass runs (the one in flight skips the steps it has not begun). */
  readonly passEnded: () => Promise<void>;
  /** Resolves when every step running now has settled (called once the pass has ended). */
  readonly stepsSettled: () => Promise<unknown>;
  /** Whether a pass still runs, and the containers still locked, for the log at the deadline. */
  readonly inFlight: () => { readonly pass: boolean; readonly containers: readonly string[] };
}

/**
 * The wait of a stop: the pass in flight ends, then the steps it began
 * finish (an upgrade commits or rolls back), bounded by the deadline. At the
 * deadline it logs what still runs and resolves: nothing is cancelled or
 * killed, and a step the process exit interrupts is left to the journal.
 */
export async function awaitShutdown(w: ShutdownWait): Promise<'ended' | 'deadline'> {
  let cancel: (() => void) | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    cancel = w.clock.setTimer(w.deadlineMs, () => resolve('deadline'));
  });
  const ended = (async () => {
    await w.passEnded();
    await w.stepsSettled();
    return 'ended' as const;
  })();
  const outcome = await Promise.race([ended, deadline]);
  cancel?.();
  if (outcome === 'deadline') {
    const { pass, containers } = w.inFlight();
    w.log.warn(
      { deadlineMs: w.deadlineMs, passInFlight: pass, containers },
      'shutdown deadline passed: stopping without waiting for the steps still running (nothing is killed; the journal finishes or undoes an interrupted upgrade at the next start)',
    );
  }
  return outcome;
}

/** The pass in flight when stop() came begins no step: it says how many it leaves. */
export function logStepsLeft(log: Logger, left: number): void {
  log.info({ stepsLeft: left }, `pass ended by shutdown: ${left} step(s) left for the next start`);
}
