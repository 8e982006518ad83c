import type { Clock } from '../model/clock.js';

/**
 * Passes that never overlap: a trigger during a pass queues one more (many
 * coalesce into one); after a pass the next is timed by what the pass
 * returns (the re-list interval, or sooner when something waits on time).
 */
export class PassLoop {
  private running = false;
  private queued = false;
  /** The pass running now, settled (never rejects) when it ends. */
  private current: Promise<void> | undefined;
  private cancelTimer: (() => void) | undefined;

  constructor(
    private readonly d: {
      readonly clock: Clock;
      /** One pass; resolves with the delay before the next. */
      readonly body: () => Promise<number>;
      /** The delay after a pass that ended without one. */
      readonly idleMs: number;
      /** Passes are scheduled and run only while this holds. */
      readonly active: () => boolean;
      /** A scheduled pass that threw (an awaited run() throws to its caller instead). */
      readonly onError: (err: unknown) => void;
    },
  ) {}

  /** Asks for a pass as soon as possible; coalesces. */
  trigger(): void {
    if (!this.d.active()) return;
    if (this.running) {
      this.queued = true;
      return;
    }
    this.schedule(0);
  }

  /** One more pass right after this one (work was left for it). */
  requeue(): void {
    this.queued = true;
  }

  /** A pass runs now (it may outlive close(): close() cancels only what is scheduled). */
  busy(): boolean {
    return this.running;
  }

  /** Resolves when no pass runs (at once when none does); never rejects. */
  async idle(): Promise<void> {
    while (this.current) await this.current;
  }

  /** Runs a pass now, or queues one when a pass runs. */
  async run(): Promise<void> {
    if (!this.d.active()) return;
    if (this.running) {
      this.queued = true;
      return;
    }
    this.running = true;
    let next = this.d.idleMs;
    const body = this.d.body();
    const current = body.then(
      () => undefined,
      () => undefined,
    );
    this.current = current;
    try {
      next = await body;
    } finally {
      if (this.current === current) this.current = undefined;
      this.running = false;
      if (this.d.active()) {
        if (this.queued) {
          this.queued = false;
          this.schedule(0);
        } else this.schedule(next);
      }
    }
  }

  close(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private schedule(ms: number): void {
    this.cancelTimer?.();
    this.cancelTimer = this.d.clock.setTimer(ms, () => {
      this.cancelTimer = undefined;
      this.run().catch((err: unknown) => this.d.onError(err));
    });
  }
}
