/**
 * What a rollout needs from the cluster it coordinates through: the narrow
 * door the Kubernetes backend (agent/kube/rollout-backend.ts) implements over
 * Leases and the desired ConfigMap, and an etcd backend can implement over
 * keys, leases and transactions, without touching the decisions (decide.ts)
 * or the node's driver (runner.ts).
 */
import type { SpcdError } from '../errors.js';
import type { Ledger, PhaseReport } from './decide.js';

/** The desired document as delivered: the target and the raw rollout value (validated by the runner). */
export interface DesiredDocument {
  /** Changes whenever the document does (resourceVersion, etcd mod revision). */
  readonly version: string;
  readonly images: Readonly<Record<string, string>>;
  readonly globals: Readonly<Record<string, unknown>>;
  /** The parsed `rollout` value, not yet validated; undefined when absent. */
  readonly rollout: unknown;
  /**
   * Where `rollout` came from, as its errors begin: `ConfigMap <ns>/<name> key
   * "rollout"` or `etcd key <prefix>desired, field rollout` (set by the backend).
   */
  readonly source: string;
}

export interface RolloutBackend {
  /** Follows the desired document: each new content, undefined when it is gone, an error when it is invalid. */
  followDesired(
    onChange: (d: DesiredDocument | undefined) => void,
    onInvalid: (err: SpcdError) => void,
  ): Promise<{ stop(): void }>;
  /** The ledger and the version a write must name; undefined when none was ever written. */
  readLedger(): Promise<{ readonly ledger: Ledger | undefined; readonly version: string | undefined }>;
  /** Compare-and-swap: false when someone wrote since `version` (read again and retry). */
  writeLedger(ledger: Ledger, version: string | undefined): Promise<boolean>;
  /** This node's own last report (after a restart: what it had reached). */
  readPhase(): Promise<PhaseReport | undefined>;
  /** Publishes this node's phase; only this node writes it. */
  writePhase(report: PhaseReport): Promise<void>;
  /** Every node's last report (status, and the fleet size for a failure percentage). */
  listPhases(): Promise<PhaseReport[]>;
  /**
   * Takes one of `maxConcurrent` slots (waiting as long as it takes, or until
   * `signal` aborts), runs `fn` holding it, and releases it, also when fn throws.
   */
  withSlot<T>(maxConcurrent: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T>;
}
