/**
 * The connection slots (api/connections.ts) with fake sockets and a fake
 * clock: who gives way at the cap, who is protected, who is refused.
 */
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { guardConnections } from '../../agent/api/connections.js';

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(readonly name: string) {
    super();
  }
  destroy(): this {
    this.destroyed = true;
    this.emit('close');
    return this;
  }
}

function setup(max: number, graceMs = 100) {
  const server = new EventEmitter();
  let now = 0;
  const counts = guardConnections(server as unknown as Server, {
    maxConnections: max,
    graceMs,
    now: () => now,
  });
  const connect = (name: string): FakeSocket => {
    const s = new FakeSocket(name);
    server.emit('connection', s);
    return s;
  };
  /** A request on `s`: complete (headers and body in) or still arriving. */
  const request = (s: FakeSocket, complete: boolean): EventEmitter => {
    const res = new EventEmitter();
    server.emit('request', { socket: s, complete }, res);
    return res;
  };
  return { connect, request, counts, advance: (ms: number) => (now += ms) };
}

describe('connection slots at the cap', () => {
  it('a new client takes the slot of the oldest client that is idle or still sending', () => {
    const t = setup(3);
    const a = t.connect('a');
    const b = t.connect('b');
    const c = t.connect('c');
    [a, b, c].forEach((s) => s.emit('data', Buffer.from('G')));
    t.request(b, false); // body still trickling
    const d = t.connect('d');
    expect([a, b, c, d].map((s) => s.destroyed)).toEqual([true, false, false, false]);
    const e = t.connect('e');
    expect(b.destroyed).toBe(true);
    expect(e.destroyed).toBe(false);
    expect(t.counts()).toEqual({ open: 3, evicted: 2, refused: 0 });
  });

  it('never evicts a client being served; refuses the newcomer instead', () => {
    const t = setup(2);
    const a = t.connect('a');
    const b = t.connect('b');
    t.request(a, true);
    t.request(b, true);
    t.advance(1_000);
    const c = t.connect('c');
    expect([a.destroyed, b.destroyed, c.destroyed]).toEqual([false, false, true]);
    expect(t.counts()).toEqual({ open: 2, evicted: 0, refused: 1 });
  });

  it('a served client becomes evictable again once its answer is done (idle keep-alive)', () => {
    const t = setup(1);
    const a = t.connect('a');
    const res = t.request(a, true);
    t.advance(1_000);
    expect(t.connect('b').destroyed).toBe(true);
    res.emit('close');
    const c = t.connect('c');
    expect([a.destroyed, c.destroyed]).toEqual([true, false]);
  });

  it('protects a client that has not sent a byte yet during the grace period', () => {
    const t = setup(2, 100);
    const a = t.connect('a');
    const b = t.connect('b');
    t.advance(50);
    expect(t.connect('c').destroyed).toBe(true); // both silent and young: the newcomer is refused
    b.emit('data', Buffer.from('GET / HT')); // b spoke: the grace no longer covers it
    const d = t.connect('d');
    expect([a.destroyed, b.destroyed, d.destroyed]).toEqual([false, true, false]);
    t.advance(60); // a is past the grace without a byte: it gives way to the next one
    const e = t.connect('e');
    expect([a.destroyed, e.destroyed]).toEqual([true, false]);
  });

  it('forgets closed connections', () => {
    const t = setup(2);
    const a = t.connect('a');
    t.connect('b');
    a.destroy();
    expect(t.counts().open).toBe(1);
    expect(t.connect('c').destroyed).toBe(false);
    expect(t.counts()).toEqual({ open: 2, evicted: 0, refused: 0 });
  });
});
