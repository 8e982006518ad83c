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
  /** An operation (upgrade, restart...) holds it: the planner leaves it alone. */
  readonly busy: boolean;
  /** The operator stopped it; keep it stopped. */
  readonly heldStopped: boolean;
  /** spcd gave up for a reason that needs an operator (bootstrap failed, stop action). */
  readonly failed: boolean;
  /** Earliest time a restart may happen (backoff). */
  readonly nextAttemptAt: number;
  /** The last upgrade target that failed and was rolled back: not retried while it is the desired one. */
  readonly failedTarget?: {
    readonly specHash: string;
    readonly configHash: string;
    readonly generation: number;
  };
}

/**
 * A container whose journal entry is unresolved (quarantined). The planner
 * leaves all of its instances alone, so none that the entry references (the
 * parked old one, the staged new one) is removed as an extra instance, and
 * nothing is created, started or replaced for it; a malformed entry names no
 * instance, which is why the hold is the whole container's.
 */
export interface JournalHold {
  readonly reason: string;
}

export type Step =
  | { readonly kind: 'create'; readonly desired: DesiredContainer; readonly reason: string }
  | {
      readonly kind: 'start';
      readonly desired: DesiredContainer;
      readonly observed: ObservedContainer;
      readonly reason: string;
    }
  | {
      readonly kind: 'replace';
      readonly desired: DesiredContainer;
      readonly observed: ObservedContainer;
      readonly reason: string;
    }
  | {
      readonly kind: 'remove';
      readonly observed: ObservedContainer;
      readonly reason: string;
      /** Its definition is gone (not a stray beside a defined primary): a hypervisor is kept while VMs run. */
      readonly definitionDeleted: boolean;
    };

export interface Plan {
  readonly steps: readonly Step[];
  /** Containers that wait, and why (dependencies, backoff, hold). */
  readonly waiting: readonly { readonly container: string; readonly reason: string }[];
  /**
   * Containers spcd leaves as they are because their labels were written by
   * a newer spcd (a hash scheme it does not know); absent when there are none.
   */
  readonly untouched?: readonly { readonly container: string; readonly reason: string }[];
  /** The earliest time something waiting may become possible; undefined when nothing waits on time. */
  readonly wakeAt?: number;
}

export const NO_FACTS: RuntimeFacts = { busy: false, heldStopped: false, failed: false, nextAttemptAt: 0 };
