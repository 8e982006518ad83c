/**
 * What `spcctl fleet status` shows, made from the rollout's records whichever
 * backend keeps them (Kubernetes: agent/kube/fleet-status.ts; etcd:
 * agent/etcd/fleet-status.ts): the desired document's rollout object, the
 * ledger, every node's phase report and the slot holders. One source of the
 * view: both readers hand their records to `fleetView`, and spcctl renders
 * the result the same way (agent/cli/fleet-status.ts). No I/O.
 */
import type { DesiredDocument } from './backend.js';
import { ledgerFor, summarize, type Ledger, type PhaseReport, type RolloutSummary } from './decide.js';
import { targetId } from './runner.js';
import { parseRollout, type RolloutSpec } from './spec.js';
import { windowState } from './windows.js';

/** Where the records were read: the JSON carries it as it is. */
export type FleetSource =
  | { readonly backend: 'kubernetes'; readonly namespace: string; readonly configMap: string }
  | {
      readonly backend: 'etcd';
      readonly endpoints: readonly string[];
      readonly prefix: string;
      /** The desired key (`<prefix>desired`). */
      readonly desiredKey: string;
      /** The etcd revision every record was read at (one range read). */
      readonly revision: string;
    };

export interface FleetSlot {
  /** The slot Lease's name, or the slot key in etcd. */
  readonly name: string;
  readonly holder: string | null;
  /** The Lease's renewTime; null over etcd (a slot key lives as long as its holder's lease). */
  readonly renewedAt: number | null;
}

export interface FleetView {
  /** False when there is no desired document: nothing is being rolled out. */
  readonly desired: boolean;
  readonly rollout?: {
    readonly id: string;
    /** Undefined: each node's --fleet-slots. */
    readonly maxConcurrent?: number;
    readonly canary?: RolloutSpec['canary'];
    readonly failureBudget?: RolloutSpec['failureBudget'];
    readonly paused: boolean;
    readonly windows: { readonly count: number; readonly open: boolean; readonly opensAt?: number };
  };
  readonly summary?: RolloutSummary;
  readonly nodes: readonly PhaseReport[];
  readonly slots: readonly FleetSlot[];
  readonly at: number;
}

export type FleetStatus = FleetSource & FleetView;

export interface FleetRecords {
  /** The desired document, parsed (its parser names the key of a bad part); undefined when absent. */
  readonly desired:
    | (Pick<DesiredDocument, 'images' | 'globals' | 'source'> & {
        readonly rollout?: DesiredDocument['rollout'];
      })
    | undefined;
  readonly ledger: Ledger | undefined;
  readonly phases: readonly PhaseReport[];
  readonly slots: readonly FleetSlot[];
}

const byName = (a: string, b: string): number => a.localeCompare(b, 'en', { numeric: true });

/**
 * The view of a fleet from its records at `now`. Throws SPEC_INVALID naming
 * the field when the rollout object is invalid (as every node would refuse it).
 */
export function fleetView(r: FleetRecords, now: number): FleetView {
  const nodes = [...r.phases].sort((a, b) => byName(a.node, b.node));
  const slots = [...r.slots].sort((a, b) => byName(a.name, b.name));
  const base = { nodes, slots, at: now };
  const d = r.desired;
  if (!d) return { ...base, desired: false };
  const spec = parseRollout(d.rollout, { maxConcurrent: 1, id: targetId(d) }, d.source);
  const named = (d.rollout as { maxConcurrent?: unknown } | undefined)?.maxConcurrent !== undefined;
  return {
    ...base,
    desired: true,
    rollout: {
      id: spec.id,
      ...(named ? { maxConcurrent: spec.maxConcurrent } : {}),
      ...(spec.canary ? { canary: spec.canary } : {}),
      ...(spec.failureBudget ? { failureBudget: spec.failureBudget } : {}),
      paused: spec.paused,
      windows: { count: spec.windows.length, ...windowState(spec.windows, now) },
    },
    summary: summarize(spec, ledgerFor(spec.id, r.ledger), nodes),
  };
}
