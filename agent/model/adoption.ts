import type { Identity } from './labels.js';
import type { ObservedContainer } from './observed.js';

/**
 * A container spcd did not create (it carries no spcd labels), under the
 * name of a desired container: what the engine says of it, and how it
 * differs from its definition. Docker cannot add labels to a running
 * container, so such a container becomes spcd's only through an adoption
 * record the operator asked for (docs/decisions/0045-adoption-record.md).
 */
export interface UnlabeledContainer extends Omit<ObservedContainer, 'identity' | 'dockerHealth'> {
  /** Each way the running container differs from its definition ("field: definition X, running Y"). */
  readonly differences: readonly string[];
}

/** The durable mapping from an unlabeled container to an spcd container and generation. */
export interface AdoptionRecord {
  /** The engine id adopted: a different id under the same name is not this container. */
  readonly id: string;
  readonly name: string;
  readonly image: string;
  /** State.StartedAt when adopted: adoption neither stops nor restarts it. */
  readonly startedAt: string;
  readonly generation: number;
  readonly adoptedAt: string;
  /** The operator's operation that asked for it. */
  readonly operationId: string;
}

/** An adopted container's engine id and the identity its adoption record gives it. */
export interface AdoptedIdentity {
  readonly id: string;
  readonly identity: Identity;
}

/** What the planner is told of an unlabeled container under a desired name. */
export interface UnlabeledFact {
  readonly container: UnlabeledContainer;
  /**
   * Set when the container was adopted under this name with another id: it
   * changed under spcd (recreated by someone else) and is reported, not managed.
   */
  readonly adoptedId?: string;
}

/** Why this container may not be adopted now, or undefined when it may. */
export function adoptionBlock(f: UnlabeledFact): string | undefined {
  if (f.adoptedId !== undefined)
    return `changed under spcd: adopted ${f.adoptedId.slice(0, 12)}, now ${f.container.id.slice(0, 12)} runs under its name; release it or resolve by hand`;
  if (f.container.state !== 'running')
    return `not running (${f.container.state}); adopt only a running container`;
  if (f.container.differences.length > 0)
    return `differs from its definition: ${f.container.differences.join('; ')}`;
  return undefined;
}

/** An adopted container as the reconciler sees it: the record gives it the identity labels would. */
export function adoptedObserved(
  c: UnlabeledContainer,
  identity: Omit<Identity, 'container' | 'generation'>,
  record: AdoptionRecord,
): ObservedContainer {
  return {
    id: c.id,
    name: c.name,
    identity: { ...identity, container: record.name, generation: record.generation },
    state: c.state,
    image: c.image,
    imageId: c.imageId,
    startedAt: c.startedAt,
    finishedAt: c.finishedAt,
    exitCode: c.exitCode,
    pid: c.pid,
  };
}
