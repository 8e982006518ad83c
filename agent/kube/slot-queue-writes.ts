/**
 * A waiting node's own writes to a slot's queue (slot-waiter.ts): joining it,
 * leaving it, and handing on a slot handed to it that it does not want. The
 * queue entries are one annotation key per node (slot-queue.ts), written with
 * merge patches: waiters never conflict with each other. Taking, renewing and
 * handing over a slot are FleetSlots' (fleet-slots.ts).
 */
import type { V1Lease } from '@kubernetes/client-node';
import { CONCERNS_PREFIX, QUEUE_PREFIX, nodeLabel, queueOf } from './slot-queue.js';
import { SlotHandle, type FleetSlots } from './fleet-slots.js';

/**
 * Joins the slot's queue: a merge patch adding this node's own annotation
 * key (no resourceVersion: joining never conflicts). Seeing nobody queued,
 * it also labels the slot as its concern (the head watches for the
 * holder's expiry; the next guarded write sets the labels right). Resolves
 * the lease patched, or undefined when the slot is gone.
 */
export async function enqueue(slots: FleetSlots, name: string, seen: V1Lease): Promise<V1Lease | undefined> {
  const me = slots.holder;
  const queue = queueOf(seen);
  if (queue.includes(me)) return seen;
  return slots.patchSlot(name, {
    metadata: {
      annotations: {
        [QUEUE_PREFIX + nodeLabel(me)]: JSON.stringify({ node: me, at: slots.now() }),
      },
      ...(queue.length === 0 ? { labels: { [CONCERNS_PREFIX + nodeLabel(me)]: 'true' } } : {}),
    },
  });
}

/**
 * Leaves the slot's queue (a waiter that gave up or took another slot): a
 * merge patch removing its key. When the slot was handed to us meanwhile,
 * hands it on at once.
 */
export async function leaveQueue(slots: FleetSlots, name: string): Promise<void> {
  const me = slots.holder;
  const lease = await slots.read(name);
  if (!lease) return;
  if (lease.spec?.holderIdentity === me) return handOn(slots, name, lease);
  if (!queueOf(lease).includes(me)) return;
  await slots.patchSlot(name, {
    metadata: {
      annotations: { [QUEUE_PREFIX + nodeLabel(me)]: null },
      labels: { [CONCERNS_PREFIX + nodeLabel(me)]: null },
    },
  });
}

/**
 * Hands on a slot handed to this node that it does not want (it holds or
 * waits for another): to its queue, else to a waiter elsewhere (it was
 * handed over, so slots are contended), else cleared.
 */
export function handOn(slots: FleetSlots, name: string, lease: V1Lease): Promise<void> {
  const h = new SlotHandle(name, lease, slots.now());
  h.waited = true;
  return slots.release(h);
}
