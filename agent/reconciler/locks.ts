import { SpcdError } from '../errors.js';
import type { OperationKind, StepOperation } from '../planner/types.js';

export type { OperationKind } from '../planner/types.js';

/** What locks a container: an operation of a typed kind (planner/types.ts, OperationKind). */
export type LockingOperation = StepOperation;

const UPGRADES: ReadonlySet<OperationKind> = new Set(['upgrade', 'rollback', 'set-upgrade']);

/** An operator's upgrade or rollback: the container shows as `upgrading` while one has it locked. */
export function isUpgrade(op: LockingOperation | null): boolean {
  return op !== null && UPGRADES.has(op.kind);
}

/**
 * One lock per container. A pass's listing that began while a container was
 * locked may predate the operation's end, so the lock remembers the listing
 * current when it was released (see lockedDuringListing).
 */
export class ContainerLocks {
  private readonly current = new Map<string, LockingOperation>();
  private readonly releasedAt = new Map<string, number>();

  /** `listing` gives the number of the engine listing under way (EngineWatch). */
  constructor(private readonly listing: () => number) {}

  /** The operation that has the container locked now, or null. */
  lockedBy(name: string): LockingOperation | null {
    return this.current.get(name) ?? null;
  }

  /** Throws CONFLICT when an operation has it locked. */
  assertFree(name: string): void {
    const op = this.current.get(name);
    if (op)
      throw new SpcdError('CONFLICT', `${name} is busy with operation ${op.id}`, {
        container: name,
        operation: op.id,
      });
  }

  acquire(name: string, op: LockingOperation): void {
    this.assertFree(name);
    this.current.set(name, op);
  }

  release(name: string): void {
    this.current.delete(name);
    this.releasedAt.set(name, this.listing());
  }

  /** Locked now, or released after the current listing began (so that listing may predate its end). */
  lockedDuringListing(name: string): boolean {
    return this.current.has(name) || (this.releasedAt.get(name) ?? -1) >= this.listing();
  }

  /** Every container locked now. */
  names(): string[] {
    return [...this.current.keys()];
  }
}
