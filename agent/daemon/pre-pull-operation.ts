/**
 * A pre-pull under an operation of its own, through the owner of operations
 * the operator's verbs use: its `operation` events (accepted, then succeeded
 * or failed) and its pulls' `pull-progress` carry one id, and `done(id)`
 * answers for it, its failure included.
 */
import type { ImagePuller } from '../executor/pre-pull.js';
import type { OperationRef } from '../model/operation.js';
import type { Operations } from '../reconciler/operations.js';

/** What a pre-pull's operation is about: no container, the images. */
export const PRE_PULL_TARGET = 'images';

/**
 * Makes images present (pulled when missing) under an operation of kind
 * `pre-pull`: `running` ends with it (rejects with its failure), `ref` names
 * its operation.
 */
export type TrackedPrePull = (images: readonly string[]) => {
  readonly ref: OperationRef;
  readonly running: Promise<void>;
};

/**
 * Each pre-pull an operation of kind `pre-pull` (target `images`; its result
 * the distinct images, in order). It locks no container and waits for no
 * lock: a pull changes no container, so nothing a container's operation does
 * can conflict with it (decision 0069).
 */
export function trackedPrePull(puller: ImagePuller, operations: Operations): TrackedPrePull {
  return (images) => {
    const wanted = [...new Set(images)];
    const id = operations.newId('pre-pull');
    // Begun after `track` has published `accepted`: a refusal's event comes after it.
    const running = Promise.resolve().then(() => puller.prePull(wanted, id));
    const ref = operations.track(
      id,
      'pre-pull',
      PRE_PULL_TARGET,
      running.then(() => ({ images: wanted })),
    );
    return { ref, running };
  };
}
