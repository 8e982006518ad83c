/** Time as a dependency, so unit tests can drive it (architecture habit 9). */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls fn after ms; returns a cancel function. */
  setTimer(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: (ms, fn) => {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};
