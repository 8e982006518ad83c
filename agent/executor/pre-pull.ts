import { resolveImage } from './image.js';
import type { ExecutorDeps } from './ports.js';

/** Makes images present ahead of their use, touching no container. */
export interface ImagePuller {
  /** Each image pulled when missing, one after the other; the first failure ends it. */
  prePull(images: readonly string[], operationId: string): Promise<void>;
}

/**
 * The image puller over the executor's deps: each image through
 * resolveImage with the pull policy 'missing', so the image policy and the
 * registry credentials apply as they do before a create.
 */
export function imagePuller(deps: ExecutorDeps): ImagePuller {
  return {
    async prePull(images, operationId) {
      for (const image of new Set(images)) await resolveImage(deps, image, 'missing', operationId);
    },
  };
}
