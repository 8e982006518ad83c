import type { Logger } from '../log.js';
import type { EventBus } from '../model/events.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { DesiredContainer } from '../planner/types.js';
import type { StateStore } from '../state/store.js';
import type { ContainerLedger } from './ledger.js';

export interface ExitDeps {
  readonly state: Pick<StateStore, 'observeGeneration' | 'record'>;
  readonly ledger: ContainerLedger;
  readonly events: EventBus;
  readonly log: Logger;
  readonly primary: (name: string) => ObservedContainer | undefined;
  /** Locked now, or released after the current listing began: its exit may be the operation's own. */
  readonly lockedDuringListing: (name: string) => boolean;
}

/**
 * Step 2 of a pass: records the generation each container runs, and counts
 * each exit once (by its finishedAt) toward the container's backoff, logged
 * and published as `exited` or `crash-looping`.
 */
export async function noteExits(
  d: ExitDeps,
  desired: readonly DesiredContainer[],
  now: number,
): Promise<void> {
  for (const c of desired) {
    const name = c.spec.name;
    const p = d.primary(name);
    if (!p) continue;
    // A failed write (disk full) must not end the pass: the number is reserved in memory anyway.
    await d.state.observeGeneration(name, p.identity.generation).catch((err: unknown) => {
      d.log.warn({ container: name, err: (err as Error).message }, 'cannot record generation');
    });
    if (d.lockedDuringListing(name) || isRunning(p) || p.state === 'created' || !p.finishedAt) continue;
    const backoff = d.ledger.exited(name, p.finishedAt, now, d.state.record(name)?.heldStopped ?? false);
    if (!backoff) continue;
    const to = d.ledger.crashLooping(name) ? 'crash-looping' : 'exited';
    d.log.warn(
      {
        container: name,
        exitCode: p.exitCode,
        to,
        failures: backoff.failures,
        restartInMs: Math.max(0, backoff.nextAttemptAt - now),
      },
      to === 'crash-looping' ? 'container exited again: crash-looping' : 'container exited',
    );
    d.events.publish({
      type: 'state',
      at: now,
      container: name,
      from: 'running',
      to,
      reason: `exited with ${p.exitCode}`,
    });
  }
}
