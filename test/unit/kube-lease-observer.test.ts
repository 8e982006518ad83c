import type { V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { LeaseObserver } from '../../agent/kube/lease-observer.js';
import { FakeClock } from '../support/fake-clock.js';

const slot = (spec: V1Lease['spec'], annotations?: Record<string, string>): V1Lease => ({
  metadata: { name: 'slot-0', ...(annotations ? { annotations } : {}) },
  spec,
});

describe('slot expiry on the observer’s clock', () => {
  it('counts from when the record was seen, whatever its renewTime says', () => {
    const clock = new FakeClock();
    const o = new LeaseObserver(clock, 30);
    const t0 = clock.now();
    const future = slot({ holderIdentity: 'b', renewTime: '2099-01-01T00:00:00.000000Z' as never });
    expect(o.expiresAt(future)).toBe(t0 + 30_000);
    clock.advance(10_000);
    expect(o.expiresAt(future)).toBe(t0 + 30_000); // the same record: not renewed
    const past = slot({ holderIdentity: 'b', renewTime: '2001-01-01T00:00:00.000000Z' as never });
    expect(o.expiresAt(past)).toBe(t0 + 40_000); // a changed record is a renewal, seen now
  });

  it('a waiter joining the queue (an annotation) does not renew the holder', () => {
    const clock = new FakeClock();
    const o = new LeaseObserver(clock, 30);
    const spec = { holderIdentity: 'b', renewTime: '2026-01-01T00:00:00.000000Z' as never };
    const t0 = clock.now();
    o.expiresAt(slot(spec));
    clock.advance(5_000);
    expect(o.expiresAt(slot(spec, { 'queue.spcd.openstack.org/c': '{"node":"c","at":1}' }))).toBe(
      t0 + 30_000,
    );
  });

  it('a Lease cannot grant itself a longer life than this node’s setting; a shorter one holds', () => {
    const clock = new FakeClock();
    const o = new LeaseObserver(clock, 30);
    const t0 = clock.now();
    expect(o.expiresAt(slot({ holderIdentity: 'b', leaseDurationSeconds: 1e9 }))).toBe(t0 + 30_000);
    expect(o.expiresAt(slot({ holderIdentity: 'b', leaseDurationSeconds: 10 }))).toBe(t0 + 10_000);
    expect(o.expiresAt(slot({ holderIdentity: '' }))).toBeUndefined();
    expect(o.expiresAt(slot({}))).toBeUndefined();
  });
});
