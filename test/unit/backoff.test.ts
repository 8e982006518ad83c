import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BACKOFF,
  FRESH_BACKOFF,
  delayFor,
  isCrashLooping,
  recordFailure,
  recordStart,
} from '../../agent/model/backoff.js';

describe('restart backoff', () => {
  it('restarts the first failure at once, then doubles from 1 s to the 60 s cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((f) => delayFor(f, DEFAULT_BACKOFF))).toEqual([
      0, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000,
    ]);
  });

  it('marks crash-looping after 5 failures in a row and resets after a stable run', () => {
    let s = FRESH_BACKOFF;
    let t = 0;
    for (let i = 0; i < 5; i++) {
      s = recordStart(s, t);
      t += 500;
      s = recordFailure(s, t, DEFAULT_BACKOFF);
    }
    expect(s.failures).toBe(5);
    expect(isCrashLooping(s, DEFAULT_BACKOFF)).toBe(true);
    s = recordStart(s, t);
    s = recordFailure(s, t + DEFAULT_BACKOFF.stableMs, DEFAULT_BACKOFF);
    expect(s.failures).toBe(1);
    expect(s.nextAttemptAt).toBe(t + DEFAULT_BACKOFF.stableMs);
  });
});
