import { SpcdError } from '../errors.js';

/**
 * A wait that ends once, the shape both slot waiters share (kube/slot-waiter.ts,
 * etcd/slots.ts): the first end wins and later ones are ignored; an abort of
 * the signal ends it with SHUTTING_DOWN. `onEnd` is the waiter's own cleanup
 * (timers, watches), run before the promise settles.
 */
export class WaitOnce<T> {
  private done = false;
  private settle: { resolve: (v: T) => void; reject: (e: SpcdError) => void } | undefined;

  constructor(
    private readonly signal: AbortSignal | undefined,
    private readonly onEnd: (v: T | SpcdError) => void,
  ) {}

  /** True once the wait has ended. */
  get ended(): boolean {
    return this.done;
  }

  /** Listens for the abort and runs `body` as the promise's executor (a throw rejects the wait). */
  begin(body: () => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.settle = { resolve, reject };
      this.signal?.addEventListener('abort', this.onAbort, { once: true });
      body();
    });
  }

  /** Ends the wait with a value. */
  end(v: T): void {
    if (this.close(v)) this.settle?.resolve(v);
  }

  /** Ends the wait with an error. */
  fail(e: SpcdError): void {
    if (this.close(e)) this.settle?.reject(e);
  }

  readonly onAbort = (): void => this.fail(new SpcdError('SHUTTING_DOWN', 'fleet upgrade cancelled'));

  private close(v: T | SpcdError): boolean {
    if (this.done) return false;
    this.done = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    this.onEnd(v);
    return true;
  }
}
