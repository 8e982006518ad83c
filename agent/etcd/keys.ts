/**
 * The fleet's keys under its prefix (`--etcd-prefix`, ending in '/'): the one
 * place their names are spelled, for the backend, the slots and the status
 * reader (docs/fleet.md, "Over etcd").
 */
export interface FleetKeys {
  /** The operator's desired document (YAML). */
  readonly desired: string;
  /** The rollout ledger (JSON), written by compare-and-swap. */
  readonly ledger: string;
  /** `<nodes><node>`: each node's phase report (JSON). */
  readonly nodes: string;
  /** `<queue><lease id>`: one key per node waiting for or holding a slot, bound to its lease; ranked by create revision (agent/etcd/queue.ts). */
  readonly queue: string;
}

export function fleetKeys(prefix: string): FleetKeys {
  return {
    desired: `${prefix}desired`,
    ledger: `${prefix}rollout/ledger`,
    nodes: `${prefix}nodes/`,
    queue: `${prefix}queue/`,
  };
}
