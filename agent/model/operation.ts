/**
 * An operation: a piece of work with an id, from the moment it is accepted to
 * its outcome. The owner is `reconciler/operations.ts`; these are the shapes
 * its callers share.
 */
/** What a long operation answers at once (the API's 202 body). */
export interface OperationRef {
  readonly operationId: string;
  readonly kind: string;
  readonly target: string;
  readonly acceptedAt: string;
}

/** An operation as it begins: the planned step it carries out, when it is a pass's own. */
export interface OperationBegun {
  readonly operationId: string;
  readonly kind: string;
  readonly target: string;
  readonly step?: string;
}

/** The least an operation's error says; the owner gives the typed error (`SpcdError`, agent/errors.ts). */
export interface OperationError {
  readonly code: string;
  readonly message: string;
}

/**
 * How an operation ended. `cancelled`: spcd stopped before it ran
 * (SHUTTING_DOWN); its event on the bus says `failed`, as it always did.
 */
export type OperationOutcome<E extends OperationError = OperationError> =
  | (OperationBegun & { readonly phase: 'succeeded'; readonly result?: Record<string, unknown> })
  | (OperationBegun & { readonly phase: 'failed' | 'cancelled'; readonly error: E });

/**
 * An operation another one caused, as it ended: a reload's quarantine
 * retries (kind `recover`, one per container). `cleared`: the container left
 * quarantine; `quarantined`: it stays; `failed` and `cancelled` as an
 * operation's outcome. Its id is the one `done(id)` and the event bus know.
 */
export interface CausedOperation {
  readonly operationId: string;
  readonly kind: 'recover';
  readonly container: string;
  readonly outcome: 'cleared' | 'quarantined' | 'failed' | 'cancelled';
}

/** A reload's quarantine retries, as they ended: the containers still quarantined, and the retries' operations. */
export interface RetriesEnded {
  readonly quarantined: string[];
  readonly operations: CausedOperation[];
}
