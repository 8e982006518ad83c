/**
 * runFleetUpgrade: take a slot -> run the local, health-gated upgrade ->
 * release the slot (also when the upgrade fails), renewing while it runs.
 */
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { FleetSlots, SlotHandle } from './fleet-slots.js';
import { waitForSlot } from './slot-waiter.js';

export interface FleetUpgradeOptions {
  readonly clock: Clock;
  readonly log: Logger;
  /** Slow poll: pause between passes while the slot watch is lost; jittered ±50%. The safety-net pass while waiting runs every max(this, 2 lease durations). Default 5000 ms. */
  readonly retryMs?: number;
  /** A freed slot is tried after a random delay in [0, wakeSpreadMs), doubled per 409: waiters do not all race. Default 100 ms. */
  readonly wakeSpreadMs?: number;
  /** The first pass waits a random delay in [0, startJitterMs). Default 0. */
  readonly startJitterMs?: number;
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

/**
 * Waits for a slot: a pass; when every slot is busy, queue on one and watch
 * it until the holder hands it over or it expires (slot-waiter.ts). A lost watch falls back to a
 * pass every `retryMs` (jittered) until a watch holds again. Rejects
 * KUBE_UNAVAILABLE at once when the API server does not answer a pass or a take.
 */
export async function acquireSlot(slots: FleetSlots, opts: FleetUpgradeOptions): Promise<SlotHandle> {
  const random = opts.random ?? Math.random;
  const base = opts.retryMs ?? 5000;
  const started = opts.clock.now();
  // The start-up burst is spread: a whole fleet told at once does not list at once.
  const startJitter = Math.floor(random() * (opts.startJitterMs ?? 0));
  if (startJitter > 0) await pause(opts.clock, startJitter, opts.signal);
  const deadline = new AbortController();
  const cancelDeadline =
    opts.waitDeadlineMs === undefined
      ? undefined
      : opts.clock.setTimer(opts.waitDeadlineMs, () => deadline.abort());
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline.signal]) : deadline.signal;
  const timedOut = (): SpcdError =>
    new SpcdError('LEASE_CONFLICT', 'no fleet upgrade slot became free in time', {
      waitedMs: opts.clock.now() - started,
    });
  try {
    for (;;) {
      if (deadline.signal.aborted) throw timedOut();
      if (signal.aborted) throw new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled');
      const pass = await slots.pass();
      if (pass.handle) return pass.handle;
      let end: Awaited<ReturnType<typeof waitForSlot>>;
      try {
        end = await waitForSlot(slots, pass, {
          clock: opts.clock,
          log: opts.log,
          random,
          wakeSpreadMs: opts.wakeSpreadMs ?? 100,
          pollMs: base,
          signal,
        });
      } catch (err) {
        if (deadline.signal.aborted) throw timedOut();
        throw err;
      }
      if (typeof end !== 'string') return end;
      if (end === 'lost') {
        await pause(opts.clock, Math.max(1, Math.round(base * (0.5 + random()))), signal).catch(
          (err: unknown) => {
            throw deadline.signal.aborted ? timedOut() : err;
          },
        );
      }
    }
  } finally {
    cancelDeadline?.();
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
