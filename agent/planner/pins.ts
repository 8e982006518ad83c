import { specHash } from '../model/hash.js';
import { compareSpecHash } from '../model/hash-schemes.js';
import { startOrder } from '../model/order.js';
import type { ContainerSpec, DesiredState, SetSpec } from '../model/spec.js';
import type { ObservedContainer } from '../model/observed.js';
import { pickPrimary } from './plan.js';
import type { DesiredContainer } from './types.js';

/**
 * The lasting operator intents the state file keeps (state/store.ts): a pin
 * is the spec an operator's upgrade or rollback applied, over the definition
 * it was set on. Pure: the caller passes the store's reads.
 */
export interface PinSource {
  record(
    name: string,
  ): { readonly pin?: { spec: ContainerSpec; definitionHash: string } | undefined } | undefined;
}

/** The spec each recorded generation was created from. */
export interface RecordedSpecs {
  generation(name: string, generation: number): { readonly spec: ContainerSpec } | undefined;
}

/** Hashes a container's rendered config ('none' when it has none). */
export type ConfigHasher = (spec: ContainerSpec) => string;

/**
 * The definitions on disk, with operator pins applied, as the planner wants
 * them: start-ordered within each set, sets in file order. A pin whose
 * definition changed on disk since it was set is dropped: the newer intent wins.
 */
export function desiredContainers(
  state: DesiredState,
  store: PinSource,
  configHash: ConfigHasher,
): DesiredContainer[] {
  const out: DesiredContainer[] = [];
  const walk = (set: SetSpec): void => {
    const ordered = startOrder(set.containers);
    const list = 'order' in ordered ? ordered.order : [...set.containers];
    for (const fromDisk of list) {
      const pin = store.record(fromDisk.name)?.pin;
      const spec = pin && stillPinned(pin.definitionHash, fromDisk) ? pin.spec : fromDisk;
      out.push({ spec, specHash: specHash(spec), configHash: configHash(spec) });
    }
    set.sets.forEach(walk);
  };
  state.sets.forEach(walk);
  return out;
}

/** Pins dropped because their definition changed on disk (to be cleared in the store). */
export function stalePins(state: DesiredState, store: PinSource): string[] {
  const stale: string[] = [];
  const walk = (set: SetSpec): void => {
    for (const c of set.containers) {
      const pin = store.record(c.name)?.pin;
      if (pin && !stillPinned(pin.definitionHash, c)) stale.push(c.name);
    }
    set.sets.forEach(walk);
  };
  state.sets.forEach(walk);
  return stale;
}

/** The store's pins, read and cleared (StateStore in state/store.ts is one). */
export interface PinRecords extends PinSource {
  setPin(name: string, pin: undefined): Promise<void>;
}

/**
 * Clears in the store every pin whose definition changed on disk since it
 * was set (the newer intent wins, and stays won after a restart), one at a
 * time, each written before the next. Answers the names cleared. The one
 * place a pin is dropped for its definition's sake; the writes go through
 * the port, so this room still does no I/O of its own.
 */
export async function clearStalePins(state: DesiredState, store: PinRecords): Promise<string[]> {
  const stale = stalePins(state, store);
  for (const name of stale) await store.setPin(name, undefined);
  return stale;
}

/**
 * A container stays pinned while the definition its pin was set over is unchanged, judged under
 * the scheme its hash was written in (a spcd upgrade drops no pin). A hash of
 * a scheme this spcd does not know (a newer spcd set it) is kept.
 */
function stillPinned(definitionHash: string, fromDisk: ContainerSpec): boolean {
  return compareSpecHash(definitionHash, fromDisk).kind !== 'changed';
}

/**
 * While the definitions cannot be read: each container the engine shows,
 * as the spec its running generation was created from (recorded in the
 * state), with the hashes it carries, so nothing differs and nothing is
 * replaced. A container without a recorded spec is left as it is.
 */
export function keptContainers(
  observed: readonly ObservedContainer[],
  store: RecordedSpecs,
): DesiredContainer[] {
  const names = [...new Set(observed.map((o) => o.identity.container))];
  const out: DesiredContainer[] = [];
  for (const name of names) {
    const p = pickPrimary(
      name,
      observed.filter((o) => o.identity.container === name),
    );
    const rec = p && store.generation(name, p.identity.generation);
    if (!p || !rec) continue;
    out.push({ spec: rec.spec, specHash: p.identity.specHash, configHash: p.identity.configHash });
  }
  return out;
}
