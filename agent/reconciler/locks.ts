import { SpcdError } from '../errors.js';
import type { OperationKind, StepOperation } from '../planner/types.js';

export type { OperationKind } from '../planner/types.js';

/** What holds a container: an operation of a typed kind (planner/types.ts, OperationKind). */
export type HeldOperation = StepOperation;

const UPGRADES: ReadonlySet<OperationKind> = new Set(['upgrade', 'rollback', 'set-upgrade']);

/** An operator's upgrade or rollback: the container shows as `upgrading` while one holds it. */
export function isUpgrade(op: HeldOperation | null): boolean {
  return op !== null && UPGRADES.has(op.kind);
}

/**
 * One lock per container. A pass's listing that began while a container was
 * held may predate the operation's end, so the lock remembers the listing
 * current when it was released (see heldDuringListing).
 */
export class ContainerLocks {
  private readonly held = new Map<string, HeldOperation>();
  private readonly releasedAt = new Map<string, number>();

  /** `listing` gives the number of the engine listing under way (EngineWatch). */
  constructor(private readonly listing: () => number) {}

  holder(name: string): HeldOperation | null {
    return this.held.get(name) ?? null;
  }

  /** Throws CONFLICT when an operation holds it. */
  assertFree(name: string): void {
    const op = this.held.get(name);
    if (op)
      throw new SpcdError('CONFLICT', `${name} is busy with operation ${op.id}`, {
        container: name,
        operation: op.id,
      });
  }

  acquire(name: string, op: HeldOperation): void {
    this.assertFree(name);
    this.held.set(name, op);
  }

  release(name: string): void {
    this.held.delete(name);
    this.releasedAt.set(name, this.listing());
  }

  /** Held now, or released after the current listing began (so that listing may predate its end). */
  heldDuringListing(name: string): boolean {
    return this.held.has(name) || (this.releasedAt.get(name) ?? -1) >= this.listing();
  }

  /** Every container held now. */
  names(): string[] {
    return [...this.held.keys()];
  }
}
