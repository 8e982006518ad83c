import { SpcdError } from '../errors.js';
import type { Intent } from '../planner/types.js';

export type IntentResult = Record<string, unknown> | void;

interface Pending {
  readonly intent: Intent;
  readonly resolve: (r: IntentResult) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * The operator's one-shot intents (restart, stop, start, an upgrade or a
 * rollback), one per container, from the API verb that wrote it until the
 * pass that carries it out. The planner reads them as input; the pass takes
 * one when it launches its step and settles it with the step's outcome. The
 * lasting intents are in the state file (a pin, the operator's stop), so they
 * outlive a restart; a pending one-shot intent ends with its process, as an
 * operation did.
 */
export class IntentBook {
  private readonly pending = new Map<string, Pending>();

  /** Keeps the intent; resolves with what its step returns. CONFLICT at once when one is pending. */
  put(name: string, intent: Intent): Promise<IntentResult> {
    this.assertNone(name);
    return new Promise<IntentResult>((resolve, reject) => {
      this.pending.set(name, { intent, resolve, reject });
    });
  }

  assertNone(name: string): void {
    const p = this.pending.get(name);
    if (p)
      throw new SpcdError('CONFLICT', `${name} is busy with operation ${p.intent.operation.id}`, {
        container: name,
        operation: p.intent.operation.id,
      });
  }

  of(name: string): Intent | undefined {
    return this.pending.get(name)?.intent;
  }

  names(): string[] {
    return [...this.pending.keys()];
  }

  /** The pass launches its step: the intent leaves the book; `outcome` settles the verb's operation. */
  take(name: string): ((outcome: Promise<IntentResult>) => void) | undefined {
    const p = this.pending.get(name);
    if (!p) return undefined;
    this.pending.delete(name);
    return (outcome) => outcome.then(p.resolve, p.reject);
  }

  /** Ends an intent no pass will carry out (its container left the definitions; spcd stops). */
  fail(name: string, err: SpcdError): void {
    const p = this.pending.get(name);
    if (!p) return;
    this.pending.delete(name);
    p.reject(err);
  }

  /** Ends every intent no pass took (spcd stops). */
  failAll(err: SpcdError): void {
    for (const name of this.names()) this.fail(name, err);
  }

  /** An intent whose container left the definitions before a pass took it: no pass will. */
  dropUndesired(desired: ReadonlySet<string>): void {
    for (const name of this.names()) {
      if (!desired.has(name))
        this.fail(name, new SpcdError('NOT_FOUND', `no container named ${name}`, { container: name }));
    }
  }
}
