import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import {
  decodeEntry,
  encodeEntry,
  isNear,
  firstLookMs,
  listLimit,
  place,
  windowOf,
  type AheadKey,
} from '../../agent/etcd/queue.js';

/** k keys ahead, newest first (q<k-1> ... q0), as one listing returns them (at most listLimit(n)). */
function listing(n: number, k: number): { keys: AheadKey[]; more: boolean } {
  const all = Array.from({ length: k }, (_, i) => ({ key: `q${k - 1 - i}`, value: '{"node":"x"}' }));
  return { keys: all.slice(0, listLimit(n)), more: k > listLimit(n) };
}

describe('the etcd slot queue (pure part)', () => {
  it('admits a waiter with fewer than N keys ahead, and only then', () => {
    for (const n of [1, 3, 10]) {
      for (let k = 0; k < n; k++) {
        const l = listing(n, k);
        expect(place(n, l.keys, l.more)).toEqual({ kind: 'admitted' });
      }
      const l = listing(n, n);
      expect(place(n, l.keys, l.more).kind).toBe('window');
    }
  });

  it('puts a waiter whose listing is whole in the window, with every key ahead to count down', () => {
    const n = 3;
    for (let k = n; k <= listLimit(n); k++) {
      const l = listing(n, k);
      const p = place(n, l.keys, l.more);
      expect(p.kind).toBe('window');
      if (p.kind === 'window') expect([...p.ahead].sort()).toEqual(l.keys.map((x) => x.key).sort());
      expect(p.kind === 'window' && p.ahead.size).toBe(k);
    }
  });

  it('makes a waiter further back follow the key H places ahead of it', () => {
    const n = 10;
    const h = windowOf(n);
    const k = 500;
    const l = listing(n, k);
    expect(l.keys).toHaveLength(n + 2 * h);
    // q(k-1) is right ahead; the H-th ahead is q(k-H)
    expect(place(n, l.keys, l.more)).toEqual({ kind: 'follow', key: `q${k - h}` });
  });

  it('refuses a listing that says there is more but is short: INTERNAL (a bug, not a place), with the counts', () => {
    let thrown: unknown;
    try {
      place(4, [{ key: 'a', value: '' }], true);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(SpcdError);
    const e = thrown as SpcdError;
    expect(e.code).toBe('INTERNAL');
    expect(e.status).toBe(500);
    expect(e.details).toEqual({ n: 4, listed: 1, more: true, limit: listLimit(4), needed: windowOf(4) });
    expect(e.message).toContain('returned only 1');
  });

  it('a followed key announces near at rank N + H - 1, so its follower is in the window when it looks', () => {
    for (const n of [1, 2, 10, 50]) {
      const h = windowOf(n);
      expect(h).toBeGreaterThanOrEqual(2);
      expect(isNear(n, n + h - 1)).toBe(true);
      expect(isNear(n, n + h)).toBe(false);
      // The follower was at most H behind: when its key announces, it has at most (N + H - 1) + H ahead.
      const l = listing(n, n + h - 1 + h);
      expect(place(n, l.keys, l.more).kind).toBe('window');
    }
  });

  it('reads back what it writes, and a hand-written value as a waiter named by the text', () => {
    for (const e of [
      { node: 'compute-1', near: false },
      { node: 'compute-2', near: true },
    ])
      expect(decodeEntry(encodeEntry(e))).toEqual(e);
    expect(decodeEntry('compute-3')).toEqual({ node: 'compute-3', near: false });
    expect(decodeEntry('{"near":true}')).toEqual({ node: '{"near":true}', near: false });
  });

  it('a far waiter first looks when the front could have reached its window, not before', () => {
    // N = 10: the window is N + 2H = 30 places; the front moves at most 10 places per 50 ms swap
    expect(firstLookMs(10, 29)).toBe(0);
    expect(firstLookMs(10, 30)).toBe(0);
    expect(firstLookMs(10, 130)).toBe(500);
    expect(firstLookMs(10, 999)).toBe(4845);
    expect(firstLookMs(1, 10_000)).toBe(60_000); // at most a minute
    expect(firstLookMs(10, Infinity)).toBe(0); // count unknown: look now
    expect(firstLookMs(10, 130, 1)).toBe(100);
  });
});
