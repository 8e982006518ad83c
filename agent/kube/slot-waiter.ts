/**
 * waitForSlot: a node that found every slot busy watches the slot Leases
 * (from the resourceVersion its pass listed) and tries a slot the moment one
 * is released, deleted, or expires, instead of polling. Each wake-up is
 * spread over a random delay so that the waiters do not all race for the
 * same freed slot; a waiter that sees the slot taken before its delay ends
 * does not try, and each 409 doubles the waiter's spread (binary exponential
 * backoff: the number of waiters is unknown, the conflicts measure it). A lost watch falls back to a slow poll, then lists and
 * watches again; 410 Gone lists again at once.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { WatchHandle } from './client.js';
import type { FleetSlots, SlotHandle } from './fleet-slots.js';

export interface SlotWaitOptions {
  readonly clock: Clock;
  readonly log: Logger;
  readonly random: () => number;
  /** A freed slot is tried after a random delay in [0, wakeSpreadMs). */
  readonly wakeSpreadMs: number;
  /** A pass over all slots (watch kept) this often (jittered ±50%): finds a free slot nobody watches. */
  readonly pollMs: number;
  readonly signal?: AbortSignal;
}

/** Why a wait ended without a slot: list again now ('relist') or after the slow poll ('lost'). */
export type WaitEnd = 'relist' | 'lost';

/**
 * Watches from `pass` until a slot is taken (resolves the handle) or the
 * watch cannot go on (resolves 'relist' / 'lost'). Rejects when the API
 * server refuses a take for another reason than 409, or on abort.
 */
export function waitForSlot(
  slots: FleetSlots,
  pass: { leases: Map<string, V1Lease>; resourceVersion: string },
  opts: SlotWaitOptions,
): Promise<SlotHandle | WaitEnd> {
  const { clock, log, random } = opts;
  const seen = new Map(pass.leases);
  // A waiter follows one slot, picked at random: each release wakes about 1/N of
  // the waiters, not all of them. The slow pass every pollMs (one list, the
  // watch kept) finds any other slot that is free.
  const mine = slots.slotName(Math.floor(random() * slots.slots));
  let rv = pass.resourceVersion;
  let handle: WatchHandle | undefined;
  let settled = false;
  let trying = false;
  /** 409s so far: each doubles the spread, as Ethernet backs off (how many race is unknown). */
  let losses = 0;
  const timers = new Map<string, () => void>();
  let cancelExpiry: (() => void) | undefined;
  let cancelPoll: (() => void) | undefined;

  return new Promise<SlotHandle | WaitEnd>((resolve, reject) => {
    const finish = (v: SlotHandle | WaitEnd | SpcdError): void => {
      if (settled) return;
      settled = true;
      handle?.stop();
      for (const cancel of timers.values()) cancel();
      timers.clear();
      cancelExpiry?.();
      cancelPoll?.();
      opts.signal?.removeEventListener('abort', onAbort);
      if (v instanceof SpcdError) reject(v);
      else resolve(v);
    };
    const onAbort = (): void => finish(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    const attempt = (name: string): void => {
      timers.delete(name);
      if (settled || trying || !slots.isFree(name, seen.get(name))) return;
      trying = true;
      slots.tryTake(name, seen.get(name)).then(
        (h) => {
          trying = false;
          if (h && settled) {
            // Aborted while our take was in flight: give the slot straight back.
            void slots.release(h).catch(() => undefined);
          } else if (h) finish(h);
          else {
            losses = Math.min(losses + 1, 8);
            consider(); // 409: the watch brings who took it; look again
          }
        },
        (err: unknown) => {
          trying = false;
          finish(isSpcdError(err) ? err : new SpcdError('KUBE_UNAVAILABLE', String(err)));
        },
      );
    };

    /** Schedules a try for each free slot, and a wake-up at the earliest expiry. */
    const consider = (): void => {
      if (settled) return;
      let earliest: number | undefined;
      {
        const name = mine;
        const lease = seen.get(name);
        if (slots.isFree(name, lease)) {
          if (timers.has(name)) return;
          const delay = Math.floor(random() * opts.wakeSpreadMs * 2 ** losses);
          if (delay <= 0) attempt(name);
          else
            timers.set(
              name,
              clock.setTimer(delay, () => attempt(name)),
            );
        } else {
          timers.get(name)?.();
          timers.delete(name);
          const until = lease ? slots.heldUntil(lease) : undefined;
          if (until !== undefined && (earliest === undefined || until < earliest)) earliest = until;
        }
      }
      cancelExpiry?.();
      cancelExpiry =
        earliest === undefined ? undefined : clock.setTimer(earliest - clock.now() + 1, () => consider());
    };

    const follow = (): void => {
      let gone = false;
      slots
        .watch(
          mine,
          rv,
          (type, obj) => {
            if (type === 'ERROR') {
              if ((obj as { code?: unknown }).code === 410) gone = true;
              return;
            }
            if (type === 'BOOKMARK') return;
            const lease = obj as V1Lease;
            const name = lease.metadata?.name;
            if (lease.metadata?.resourceVersion) rv = lease.metadata.resourceVersion;
            if (!name) return;
            if (type === 'DELETED') seen.delete(name);
            else seen.set(name, lease);
            consider();
          },
          (err) => {
            handle = undefined;
            if (settled) return;
            if (gone || isSpcdError(err, 'KUBE_GONE')) return finish('relist');
            if (err) {
              log.warn({ code: (err as SpcdError).code }, 'slot watch lost; polling slowly until it is back');
              return finish('lost');
            }
            follow(); // the server closed the stream at its timeout: go on from where we were
          },
        )
        .then(
          (h) => {
            if (settled) h.stop();
            else handle = h;
          },
          () => finish('lost'),
        );
    };
    follow();
    consider();
    // The slow pass over all slots, watch kept: one list, and a take when another slot is free.
    const schedulePoll = (): void => {
      cancelPoll = clock.setTimer(Math.max(1, Math.round(opts.pollMs * (0.5 + random()))), () => {
        if (settled) return;
        if (trying) return schedulePoll();
        trying = true;
        slots.pass().then(
          (p) => {
            trying = false;
            if (p.handle && settled) void slots.release(p.handle).catch(() => undefined);
            else if (p.handle) finish(p.handle);
            else schedulePoll();
          },
          (err: unknown) => {
            trying = false;
            finish(isSpcdError(err) ? err : new SpcdError('KUBE_UNAVAILABLE', String(err)));
          },
        );
      });
    };
    schedulePoll();
  });
}
