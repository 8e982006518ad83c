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
  /** `<slots><i>`: the slot keys, bound to their holders' leases. */
  readonly slots: string;
}

export function fleetKeys(prefix: string): FleetKeys {
  return {
    desired: `${prefix}desired`,
    ledger: `${prefix}rollout/ledger`,
    nodes: `${prefix}nodes/`,
    slots: `${prefix}slots/`,
  };
}

/** The slot index of a key under the slot prefix (`<slots><i>`); undefined for anything else. */
export function slotIndex(slotPrefix: string, key: string): number | undefined {
  if (!key.startsWith(slotPrefix)) return undefined;
  const rest = key.slice(slotPrefix.length);
  return /^(0|[1-9][0-9]{0,5})$/.test(rest) ? Number(rest) : undefined;
}
