import type { GenerationRecord } from '../../agent/state/store.js';
import { containerSpec } from './spec.js';

/** What StateStore.allocate is given for a generation of container `api` running `image`. */
export const generationEntry = (
  image: string,
): Omit<GenerationRecord, 'generation' | 'outcome' | 'createdAt'> => ({
  image,
  imageDigest: null,
  specHash: `h-${image}`,
  configHash: 'none',
  spec: containerSpec('api', { image }),
});
