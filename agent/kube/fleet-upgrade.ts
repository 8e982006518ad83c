/**
 * runFleetUpgrade: take a slot -> run the local, health-gated upgrade ->
 * release the slot (also when the upgrade fails), renewing while it runs.
 */
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { FleetSlots, SlotHandle } from './fleet-slots.js';

export interface FleetUpgradeOptions {
  readonly clock: Clock;
  readonly log: Logger;
  /** Pause between passes while every slot is busy; jittered ±50%. Default 1000 ms. */
  readonly retryMs?: number;
  /** Give up waiting for a slot after this long (rejects LEASE_CONFLICT). Default: wait forever. */
  readonly waitDeadlineMs?: number;
  readonly signal?: AbortSignal;
  readonly random?: () => number;
  /** Told when the slot is held (for status and events). */
  readonly onAcquired?: (slot: string) => void;
}

function pause(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));
    const onAbort = () => {
      cancel();
      reject(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));
    };
    const cancel = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Waits for a slot. Rejects KUBE_UNAVAILABLE at once when the API server does not answer. */
export async function acquireSlot(slots: FleetSlots, opts: FleetUpgradeOptions): Promise<SlotHandle> {
  const random = opts.random ?? Math.random;
  const base = opts.retryMs ?? 1000;
  const started = opts.clock.now();
  for (;;) {
    if (opts.signal?.aborted) throw new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled');
    const h = await slots.acquire();
    if (h) return h;
    if (opts.waitDeadlineMs !== undefined && opts.clock.now() - started >= opts.waitDeadlineMs)
      throw new SpcdError('LEASE_CONFLICT', 'no fleet upgrade slot became free in time', {
        waitedMs: opts.clock.now() - started,
      });
    await pause(opts.clock, Math.max(1, Math.round(base * (0.5 + random()))), opts.signal);
  }
}

export async function runFleetUpgrade<T>(
  slots: FleetSlots,
  doLocalUpgrade: (slot: SlotHandle) => Promise<T>,
  opts: FleetUpgradeOptions,
): Promise<T> {
  const { clock, log } = opts;
  const handle = await acquireSlot(slots, opts);
  opts.onAcquired?.(handle.name);

  let cancelTimer: (() => void) | undefined;
  let renewing: Promise<void> = Promise.resolve();
  let done = false;
  const scheduleRenew = () => {
    cancelTimer = clock.setTimer(slots.renewIntervalMs, () => {
      renewing = slots
        .renew(handle)
        .catch((err: unknown) => {
          // Unreachable API: keep the local upgrade going (stopping midway is
          // worse); the lease expires on its own if we never get through.
          log.warn(
            { slot: handle.name, code: isSpcdError(err) ? err.code : 'INTERNAL' },
            'slot renew failed',
          );
        })
        .finally(() => {
          if (!done && handle.state === 'held') scheduleRenew();
        });
    });
  };
  scheduleRenew();

  try {
    return await doLocalUpgrade(handle);
  } finally {
    done = true;
    cancelTimer?.();
    await renewing;
    try {
      await slots.release(handle);
    } catch (err) {
      log.warn(
        { slot: handle.name, code: isSpcdError(err) ? err.code : 'INTERNAL' },
        'slot release failed; it frees itself at lease expiry',
      );
    }
  }
}
