import type { UnlabeledFact } from '../model/adoption.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';

/** One desired container with the hashes that decide whether it must change. */
export interface DesiredContainer {
  readonly spec: ContainerSpec;
  readonly specHash: string;
  readonly configHash: string;
}

/** What the reconciler knows about a container beyond the engine. */
export interface RuntimeFacts {
  /** An operation (upgrade, restart...) has it locked: the planner leaves it alone. */
  readonly busy: boolean;
  /** Stopped by the operator (state.json's `heldStopped`): it stays stopped. */
  readonly operatorStopped: boolean;
  /** spcd gave up for a reason that needs an operator (bootstrap failed, stop action). */
  readonly failed: boolean;
  /** Earliest time a restart may happen (backoff). */
  readonly nextAttemptAt: number;
  /** Earliest time a changed definition is tried again after a replacement that failed (backoff); absent: at once. */
  readonly changeRetryAt?: number;
  /**
   * false while its checks have not passed since it started (still starting,
   * or unhealthy): a container that depends on it is not started yet.
   * Absent: ready whenever it runs.
   */
  readonly ready?: boolean;
  /** The last upgrade target that failed and was rolled back: not retried while it is the desired one. */
  readonly failedTarget?: {
    readonly specHash: string;
    readonly configHash: string;
    readonly generation: number;
  };
  /** A failing check asked for a restart (or, when `failed`, a stop); given only while it runs. */
  readonly heal?: HealRequest;
  /** The operator's pending request: planned before anything else for this container. */
  readonly intent?: Intent;
}

/**
 * A container whose journal entry is unresolved (quarantined). The planner
 * leaves all of its instances alone, so none that the entry references (the
 * parked old one, the staged new one) is removed as an extra instance, and
 * nothing is created, started or replaced for it; a malformed entry names no
 * instance, which is why the whole container is quarantined.
 */
export interface Quarantined {
  readonly reason: string;
}

/**
 * What locks a container. The reconciler's own: a planned step
 * (`reconcile`), a restart or stop a health check asked for (`heal`), a
 * quarantined journal entry tried again (`recover`). The operator's: one per
 * verb.
 */
export type OperationKind =
  | 'reconcile'
  | 'heal'
  | 'recover'
  | 'restart'
  | 'stop'
  | 'start'
  | 'upgrade'
  | 'rollback'
  | 'set-upgrade'
  | 'adopt';

/** The operation a step carries out: its id is the one the API answered with. */
export interface StepOperation {
  readonly id: string;
  readonly kind: OperationKind;
}

/**
 * An operator's request, kept (agent/reconciler/intents.ts) until a pass
 * plans it. The lasting intents (a pin, the operator's stop) are in the state
 * file; these are the one-shot ones that carry an operation.
 */
export type Intent =
  | { readonly verb: 'restart' | 'stop' | 'start' | 'adopt'; readonly operation: StepOperation }
  | {
      readonly verb: 'change';
      readonly operation: StepOperation;
      /** upgrade: to a new image; rollback: to a retained generation's spec (`from`). */
      readonly change: 'upgrade' | 'rollback';
      readonly spec: ContainerSpec;
      /** The spec hash of the definition on disk when asked: the pin is kept only while it differs. */
      readonly definitionHash: string;
      readonly pull: 'always' | 'missing' | 'never';
      readonly expectDigest?: string;
      readonly force: boolean;
      readonly from?: number;
    };

/**
 * Who asked for a step, set by the planner where it makes the step: the
 * operator (with the operation the API answered with), a failing check (a
 * heal), or the plan itself (the definitions against what runs).
 */
export type OperatorOrigin = { readonly by: 'operator'; readonly operation: StepOperation };
export type HealOrigin = { readonly by: 'heal' };
export type PlanOrigin = { readonly by: 'plan' };
export type StepOrigin = OperatorOrigin | HealOrigin | PlanOrigin;
/** Who asked for a quarantine to be tried again: the operator's reload, or the state-write retry. */
export type RecoverOrigin = OperatorOrigin | PlanOrigin;

/** A failing health check's request (the ledger keeps it until a pass plans it). */
export interface HealRequest {
  readonly reason: string;
}

/**
 * Every step kind with its fields. A kind added here does not compile until
 * agent/reconciler/steps.ts has its executor (`Executors`).
 */
export interface StepFields {
  readonly create: {
    readonly desired: DesiredContainer;
    readonly reason: string;
    readonly origin: PlanOrigin;
  };
  readonly start: {
    readonly desired: DesiredContainer;
    /** Undefined only for an operator's start of a container that has none yet. */
    readonly observed: ObservedContainer | undefined;
    readonly reason: string;
    /** The operator's start ends the operator's stop and the failure first; the plan's starts what exited. */
    readonly origin: OperatorOrigin | PlanOrigin;
  };
  readonly stop: {
    readonly desired: DesiredContainer;
    readonly observed: ObservedContainer | undefined;
    readonly reason: string;
    /** The operator's stop (stopped by the operator until their start), or a heal's (left failed for an operator). */
    readonly origin: OperatorOrigin | HealOrigin;
  };
  readonly restart: {
    readonly desired: DesiredContainer;
    readonly observed: ObservedContainer | undefined;
    readonly reason: string;
    /** The operator's restart, or a heal's. */
    readonly origin: OperatorOrigin | HealOrigin;
  };
  readonly replace: {
    readonly desired: DesiredContainer;
    readonly observed: ObservedContainer;
    readonly reason: string;
    readonly origin: PlanOrigin;
  };
  readonly upgrade: {
    readonly desired: DesiredContainer;
    readonly observed: ObservedContainer | undefined;
    readonly reason: string;
    readonly intent: Extract<Intent, { verb: 'change' }>;
    /** The operator's, under the intent's operation. */
    readonly origin: OperatorOrigin;
  };
  /** The operator's adoption of an unlabeled container: recorded, never stopped or recreated. */
  readonly adopt: {
    readonly desired: DesiredContainer;
    /** The unlabeled container under its name; undefined when there is none. */
    readonly candidate: UnlabeledFact | undefined;
    /** spcd already manages a container under this name. */
    readonly managed: ObservedContainer | undefined;
    readonly reason: string;
    readonly origin: OperatorOrigin;
  };
  /**
   * A quarantined container's journal entry tried again: finished, undone,
   * or gone (the operator removed the file), or still unresolved. Asked by the
   * operator's reload, or by spcd itself for a quarantine a full state disk
   * caused (the plan's own retry, with backoff).
   */
  readonly recover: {
    readonly container: string;
    readonly reason: string;
    readonly origin: RecoverOrigin;
  };
  readonly remove: {
    readonly observed: ObservedContainer;
    readonly reason: string;
    /** Its definition is gone (not a stray beside a defined primary): a hypervisor is kept while VMs run. */
    readonly definitionDeleted: boolean;
    readonly origin: PlanOrigin;
  };
}

export type StepKind = keyof StepFields;

/** One step of kind K (the union of all kinds by default). */
export type Step<K extends StepKind = StepKind> = {
  [P in K]: { readonly kind: P } & StepFields[P];
}[K];

export interface Plan {
  readonly steps: readonly Step[];
  /** Containers that wait, and why (dependencies, backoff, quarantine, definitions not loaded). */
  readonly waiting: readonly { readonly container: string; readonly reason: string }[];
  /**
   * Containers spcd leaves as they are because their labels were written by
   * a newer spcd (a hash scheme it does not know); absent when there are none.
   */
  readonly untouched?: readonly { readonly container: string; readonly reason: string }[];
  /**
   * Containers without spcd labels under desired names: adoptable on the
   * operator's word, or blocked (the reason); absent when there are none.
   */
  readonly adoptions?: readonly { readonly container: string; readonly blocked?: string }[];
  /** The earliest time something waiting may become possible; undefined when nothing waits on time. */
  readonly wakeAt?: number;
}

export const NO_FACTS: RuntimeFacts = {
  busy: false,
  operatorStopped: false,
  failed: false,
  nextAttemptAt: 0,
};
