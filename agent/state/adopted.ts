import type { AdoptedIdentity } from '../model/adoption.js';
import type { StateStore } from './store.js';

/**
 * Every adopted container's engine id with the identity its record gives it
 * (what its labels would say): the set of its definition, its generation,
 * and the hashes of the definition it was adopted under.
 */
export function adoptedIdentities(
  state: Pick<StateStore, 'names' | 'record' | 'generation'>,
  instance: string,
): AdoptedIdentity[] {
  const out: AdoptedIdentity[] = [];
  for (const name of state.names()) {
    const a = state.record(name)?.adopted;
    const g = a && state.generation(name, a.generation);
    if (!a || !g) continue;
    out.push({
      id: a.id,
      identity: {
        instance,
        set: g.spec.set,
        container: name,
        generation: a.generation,
        specHash: g.specHash,
        configHash: g.configHash,
      },
    });
  }
  return out;
}
