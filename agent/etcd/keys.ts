/**
 * The fleet's keys under its prefix (`--etcd-prefix`, ending in '/'): the one
 * place their names are spelled, for the backend, the slots and the status
 * reader (docs/explanation/fleet-over-etcd.md, "Over etcd").
 */
export interface FleetKeys {
  /** The operator's desired document (YAML). */
  readonly desired: string;
  /** The rollout ledger (JSON), written by compare-and-swap. */
  readonly ledger: string;
  /** `<nodes><node>`: each node's phase report (JSON). */
  readonly nodes: string;
  /**
   * `<queue><node>/<lease id>`: one key per node waiting for or holding a
   * slot, bound to its lease; ranked by create revision (agent/etcd/queue.ts).
   * Under the node's name, so that an etcd role can grant a node its own
   * queue keys and no one else's (docs/explanation/fleet-over-etcd.md, "etcd roles").
   */
  readonly queue: string;
}

/** A node's own queue keys: `<queue><node>/`. */
export function nodeQueuePrefix(prefix: string, node: string): string {
  return `${fleetKeys(prefix).queue}${node}/`;
}

/**
 * Whether a queue key is one a live node put: `<queue><node>/<lease id>`,
 * bound to that very lease (so etcd, not the holder, ends it), its value
 * naming the same node. Anything else (a key put by hand without a lease,
 * under another node's name, or naming another lease) neither holds a slot
 * nor counts in one's rank. The earlier form `<queue><lease id>`, bound to
 * its lease, still counts, so that N holds while a fleet runs both versions
 * of spcd (an etcd node role grants no such key).
 */
export function isLiveQueueKey(queue: string, key: string, lease: string, node: string): boolean {
  if (!key.startsWith(queue) || lease === '0' || !/^[0-9]+$/.test(lease)) return false;
  const name = key.slice(queue.length);
  return name === `${node}/${lease}` || name === lease;
}

export function fleetKeys(prefix: string): FleetKeys {
  return {
    desired: `${prefix}desired`,
    ledger: `${prefix}rollout/ledger`,
    nodes: `${prefix}nodes/`,
    queue: `${prefix}queue/`,
  };
}
