/**
 * A slot Lease's queue and labels (fleet-slots.ts): one annotation key per
 * waiting node, `queue.spcd.openstack.org/<node label>` = {node, at}, ordered
 * by `at` then name; the labels naming the holder and the head of the queue,
 * and `slot.spcd.openstack.org/<node>=true` on the slots that concern a node
 * (it holds the slot, or heads its queue).
 */
import { createHash } from 'node:crypto';
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';

export const SLOT_LABEL = 'spcd.openstack.org/upgrade-slot';
/** Annotation prefix: `queue.spcd.openstack.org/<node label>` = {node, at}, one key per waiting node. */
export const QUEUE_PREFIX = 'queue.spcd.openstack.org/';
/** Label: the holder (as a label value). */
export const HOLDER_LABEL = 'spcd.openstack.org/slot-holder';
/** Label: the head of the queue. */
export const NEXT_LABEL = 'spcd.openstack.org/slot-next';
/**
 * Label prefix: `slot.spcd.openstack.org/<node>=true` on the slot its node
 * holds and on the slot whose queue it heads: one label selector per waiter
 * matches both (label selectors have no "or" across keys).
 */
export const CONCERNS_PREFIX = 'slot.spcd.openstack.org/';

/** A node name as a label value: itself when it is one (63 characters at most), else a hash of it. */
export function nodeLabel(node: string): string {
  if (node.length <= 63 && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(node)) return node;
  return `h-${createHash('sha256').update(node).digest('hex').slice(0, 40)}`;
}

/** The nodes queued on a slot, in order (joined first, then by name); unreadable entries are skipped. */
export function queueOf(lease: V1Lease | undefined): string[] {
  const entries: { node: string; at: number }[] = [];
  for (const [k, v] of Object.entries(lease?.metadata?.annotations ?? {})) {
    if (!k.startsWith(QUEUE_PREFIX) || typeof v !== 'string') continue;
    try {
      const e = JSON.parse(v) as { node?: unknown; at?: unknown };
      if (typeof e.node === 'string' && e.node !== '' && typeof e.at === 'number')
        entries.push({ node: e.node, at: e.at });
    } catch {
      // not a queue entry
    }
  }
  entries.sort((a, b) => a.at - b.at || (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  return entries.map((e) => e.node);
}

/**
 * Metadata for a write of a slot seen as `lease` (its resourceVersion kept:
 * the write is guarded by it), with `holder`, the nodes in `leaving` out of
 * the queue, and the labels naming the holder and the head of the queue.
 */
export function slotMeta(
  lease: V1Lease | undefined,
  name: string,
  namespace: string,
  holder: string | undefined,
  leaving: readonly string[],
): NonNullable<V1Lease['metadata']> {
  const annotations = { ...(lease?.metadata?.annotations ?? {}) };
  for (const n of leaving) delete annotations[QUEUE_PREFIX + nodeLabel(n)];
  const queue = queueOf({ metadata: { annotations } });
  const labels: Record<string, string> = { ...(lease?.metadata?.labels ?? {}), [SLOT_LABEL]: 'true' };
  delete labels[HOLDER_LABEL];
  delete labels[NEXT_LABEL];
  for (const k of Object.keys(labels)) if (k.startsWith(CONCERNS_PREFIX)) delete labels[k];
  if (holder) labels[HOLDER_LABEL] = nodeLabel(holder);
  if (queue[0]) labels[NEXT_LABEL] = nodeLabel(queue[0]);
  for (const n of [holder, queue[0]]) if (n) labels[CONCERNS_PREFIX + nodeLabel(n)] = 'true';
  return {
    ...(lease?.metadata ?? {}),
    name,
    namespace,
    labels,
    ...(Object.keys(annotations).length > 0 ? { annotations } : { annotations: undefined }),
  };
}

/**
 * Whom a holder that finishes with nobody queued on its slot hands it to
 * instead: a node waiting in another slot's queue, never among its first two
 * (the head may be taking its own slot over at expiry; the second is the
 * likeliest to get its own slot between this list and the hand-over, and a
 * node handed a slot it no longer waits for holds it until it expires), at
 * random among all such nodes: longer queues offer more of them, and
 * holders finishing at once from much the same list seldom pick the same
 * node. Without this a slot whose queue ran dry stays idle while other slots
 * still have long queues, and the rollout ends when the longest queue does.
 * Undefined when no other queue is three long.
 */
export function waiterToSteal(
  leases: Iterable<V1Lease>,
  own: string,
  me: string,
  random: () => number,
): string | undefined {
  const candidates: string[] = [];
  for (const l of leases) {
    if (l.metadata?.name === own) continue;
    candidates.push(
      ...queueOf(l)
        .filter((n) => n !== me)
        .slice(2),
    );
  }
  if (candidates.length === 0) return undefined;
  return candidates[Math.min(candidates.length - 1, Math.floor(random() * candidates.length))];
}

/**
 * The write by which `me` gives up a slot seen as `lease` (its resourceVersion
 * kept: the write is guarded by it): to `next` (acquireTime and renewTime
 * now, one more transition, `next` out of the queue), or, with no `next`,
 * with holderIdentity cleared.
 */
export function handedOver(
  lease: V1Lease,
  name: string,
  namespace: string,
  me: string,
  next: string | undefined,
  at: { now: number; leaseDurationSeconds: number },
): V1Lease {
  const duration = lease.spec?.leaseDurationSeconds ?? at.leaseDurationSeconds;
  const transitions = lease.spec?.leaseTransitions ?? 0;
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: slotMeta(lease, name, namespace, next, next ? [next, me] : [me]),
    spec: next
      ? {
          holderIdentity: next,
          leaseDurationSeconds: duration,
          acquireTime: new V1MicroTime(at.now),
          renewTime: new V1MicroTime(at.now),
          leaseTransitions: transitions + 1,
        }
      : { leaseDurationSeconds: duration, leaseTransitions: transitions },
  };
}
