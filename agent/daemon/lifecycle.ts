/**
 * Start-up as an ordered list of components, each with its start and stop
 * declared before anything starts. Whatever happens part way (a failure, or
 * SIGTERM while a start waits, e.g. for Docker), stop() closes exactly what
 * was opened, newest first, and waits for it.
 */
import type { Logger } from '../log.js';

export interface Component {
  readonly name: string;
  start(): Promise<void>;
  /** Undoes start(); must cope with a start that failed or never finished. */
  stop(): Promise<void>;
  /** Makes a start still in flight give up (e.g. stop waiting for the engine). */
  interrupt?(): void;
  /**
   * Called on every opened component as soon as stopping begins, before any
   * stop is awaited: take no new work from now on (the reconciler begins no
   * new pass while a fleet integration stops). Must not throw or wait.
   */
  drain?(): void;
}

export type StartOutcome =
  | { readonly kind: 'started' }
  | { readonly kind: 'stopped' }
  | { readonly kind: 'failed'; readonly component: string; readonly error: unknown };

export class Components {
  private readonly opened: Component[] = [];
  private current: { component: Component; settled: Promise<unknown> } | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly list: readonly Component[],
    private readonly log: Logger,
  ) {}

  /** Starts each component in order; on failure or stop, everything opened is closed before it returns. */
  async start(): Promise<StartOutcome> {
    for (const c of this.list) {
      if (this.stopping) break;
      // Counted as opened before its start runs: a stop meanwhile must close what it half opened.
      this.opened.push(c);
      const run = c.start();
      this.current = { component: c, settled: run.catch(() => undefined) };
      try {
        await run;
      } catch (err) {
        this.current = undefined;
        if (this.stopping) break;
        this.log.error({ component: c.name, err: (err as Error).message }, 'start-up failed; closing');
        await this.stop();
        return { kind: 'failed', component: c.name, error: err };
      }
      this.current = undefined;
    }
    if (this.stopping) {
      await this.stopping;
      return { kind: 'stopped' };
    }
    return { kind: 'started' };
  }

  /**
   * Idempotent: drains every opened component, interrupts a start in flight,
   * waits for it, then stops what was opened, newest first.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const c of [...this.opened].reverse()) c.drain?.();
      const cur = this.current;
      if (cur) {
        cur.component.interrupt?.();
        await cur.settled;
      }
      for (const c of [...this.opened].reverse()) {
        try {
          await c.stop();
        } catch (err) {
          this.log.error({ component: c.name, err: (err as Error).message }, 'stopping failed');
        }
      }
    })();
    return this.stopping;
  }
}
