import type { Clock } from '../../agent/model/clock.js';

/** A manual clock: timers fire only when advance() passes their time. */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  /** How many timers have fired so far: a test proves that nothing was due by this staying put. */
  fired = 0;

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return () => {
      this.timers.delete(id);
    };
  }

  pending(): number {
    return this.timers.size;
  }

  /** Moves time forward, firing due timers in time order (and the ones they schedule). */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = Math.max(this.t, next[1].at);
      this.fired++;
      next[1].fn();
    }
    this.t = end;
  }
}
