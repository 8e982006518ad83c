import type { ObservedContainer } from '../model/observed.js';
import type { ContainerEngine } from '../engine/types.js';
import type { ExitWatch } from './ports.js';

/** What stopping the old instance needs: the engine's stop and, when the host can see exits, the exit watch. */
export interface StopOldDeps {
  readonly engine: Pick<ContainerEngine, 'stop'>;
  readonly exits?: ExitWatch;
}

export interface OldStopped {
  /** The successor was allowed to start before the engine finished the stop (the old one's processes are gone). */
  readonly early: boolean;
  /** The engine's stop; await it before the gate: its failure still rolls the upgrade back. */
  readonly engineStop: Promise<void>;
}

/**
 * Stops the old instance of an upgrade and returns when its successor may
 * start. That is when the engine's stop returns, except for a host-network
 * container whose processes the host can see (deps.exits): then as soon as
 * none of them is left, while the engine still reaps, kills the empty
 * cgroup, unmounts and records the exit. A host-network container holds
 * nothing in the engine once its processes are gone (no network namespace,
 * no published port, no address), so its successor can start then; with any
 * other network the engine still releases ports and addresses after the
 * exit, and the successor waits for the engine. The grace period is the
 * engine's, unchanged.
 */
export async function stopOld(
  deps: StopOldDeps,
  old: ObservedContainer,
  graceMs: number,
  hostNetwork: boolean,
): Promise<OldStopped> {
  const tracker =
    hostNetwork && deps.exits ? await deps.exits.track(old.id, old.pid).catch(() => undefined) : undefined;
  const engineStop = deps.engine.stop(old.id, graceMs);
  // Handled here; the caller awaits engineStop itself and sees a failure then.
  engineStop.catch(() => undefined);
  if (!tracker) {
    await engineStop;
    return { early: false, engineStop };
  }
  const ctl = new AbortController();
  try {
    const first = await Promise.race([
      engineStop.then(() => 'engine' as const),
      tracker
        .gone(ctl.signal)
        .then((g) => (g ? ('gone' as const) : ('unknown' as const)))
        .catch(() => 'unknown' as const),
    ]);
    if (first === 'unknown') await engineStop;
    return { early: first === 'gone', engineStop };
  } finally {
    ctl.abort();
  }
}

/** Awaits every promise (none is left running on a failure); throws the first failure. */
export async function settleAll(ps: readonly Promise<unknown>[]): Promise<void> {
  const rs = await Promise.allSettled(ps);
  for (const r of rs) if (r.status === 'rejected') throw r.reason;
}
