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
