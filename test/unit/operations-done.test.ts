import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import type { OperationBegun } from '../../agent/model/operation.js';
import { KEPT_FINISHED, Operations } from '../../agent/reconciler/operations.js';
import { FakeClock } from '../support/fake-clock.js';

/**
 * The owner of operations and its one way to wait for an outcome, `done(id)`
 * (decision 0058). Fake clock; nothing sleeps.
 */
function owner(): { ops: Operations; events: SpcdEvent[]; clock: FakeClock } {
  const clock = new FakeClock();
  const bus = new EventBus();
  const events: SpcdEvent[] = [];
  bus.subscribe((e) => events.push(e));
  return { ops: new Operations({ events: bus, clock, log: silentLogger() }), events, clock };
}

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const phases = (events: SpcdEvent[], id: string): string[] =>
  events.flatMap((e) => (e.type === 'operation' && e.operationId === id ? [e.phase] : []));

describe('done(id): the outcome of an operation', () => {
  it('resolves with the result once it succeeds, after its outcome is on the bus', async () => {
    const { ops, events } = owner();
    const run = deferred<Record<string, unknown>>();
    const ref = ops.track('restart-1', 'restart', 'svc', run.promise);
    let settled = false;
    const done = ops.done(ref.operationId).then((o) => {
      settled = true;
      return { o, published: phases(events, ref.operationId) };
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    run.resolve({ generation: 2 });
    const { o, published } = await done;
    expect(o).toEqual({
      operationId: 'restart-1',
      kind: 'restart',
      target: 'svc',
      phase: 'succeeded',
      result: { generation: 2 },
    });
    expect(published).toEqual(['accepted', 'succeeded']);
  });

  it('resolves with the typed error when it fails (a plain Error becomes INTERNAL)', async () => {
    const { ops, events } = owner();
    const typed = deferred<void>();
    const plain = deferred<void>();
    ops.track('upgrade-1', 'upgrade', 'svc', typed.promise);
    ops.track('upgrade-2', 'upgrade', 'other', plain.promise);
    typed.reject(new SpcdError('UPGRADE_FAILED', 'gate failed; rolled back', { container: 'svc' }));
    plain.reject(new Error('boom'));
    const failed = await ops.done('upgrade-1');
    expect(failed.phase).toBe('failed');
    if (failed.phase === 'succeeded') throw new Error('unreachable');
    expect(failed.error).toBeInstanceOf(SpcdError);
    expect(failed.error).toMatchObject({ code: 'UPGRADE_FAILED', message: 'gate failed; rolled back' });
    expect(await ops.done('upgrade-2')).toMatchObject({ phase: 'failed', error: { code: 'INTERNAL' } });
    expect(phases(events, 'upgrade-1')).toEqual(['accepted', 'failed']);
  });

  it('says cancelled for an operation spcd stopped before it ran; its event still says failed', async () => {
    const { ops, events } = owner();
    const run = deferred<void>();
    ops.track('stop-1', 'stop', 'svc', run.promise);
    run.reject(new SpcdError('SHUTTING_DOWN', 'spcd is shutting down'));
    expect(await ops.done('stop-1')).toMatchObject({ phase: 'cancelled', error: { code: 'SHUTTING_DOWN' } });
    expect(phases(events, 'stop-1')).toEqual(['accepted', 'failed']);
  });

  it('answers at once for one already finished, kept by count (the last KEPT_FINISHED), not by time', async () => {
    const { ops, clock } = owner();
    ops.track('reload-1', 'reload', 'definitions', Promise.resolve({ containers: 3 }));
    const long = deferred<void>();
    ops.track('upgrade-long', 'upgrade', 'svc', long.promise);
    await ops.done('reload-1');
    clock.advance(7 * 24 * 3_600_000);
    expect(await ops.done('reload-1')).toMatchObject({ phase: 'succeeded', result: { containers: 3 } });
    for (let i = 0; i < KEPT_FINISHED - 1; i++) ops.follow(fin(i), Promise.resolve());
    await ops.done(`reconcile-${KEPT_FINISHED - 2}`);
    expect(await ops.done('reload-1')).toMatchObject({ phase: 'succeeded' });
    ops.follow(fin(KEPT_FINISHED), Promise.resolve());
    await ops.done(`reconcile-${KEPT_FINISHED}`);
    await expect(ops.done('reload-1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // One still running is never dropped.
    long.resolve();
    expect(await ops.done('upgrade-long')).toMatchObject({ phase: 'succeeded' });
  });

  it('rejects NOT_FOUND for an id it never saw', async () => {
    const { ops } = owner();
    await expect(ops.done('restart-nope')).rejects.toBeInstanceOf(SpcdError);
    await expect(ops.done('restart-nope')).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: 'no operation restart-nope',
    });
  });

  it('follows a quiet operation (a pass step, a set member): no event, the same done, told as it begins', async () => {
    const { ops, events } = owner();
    const begun: OperationBegun[] = [];
    const off = ops.onBegin((op) => begun.push(op));
    const run = deferred<void>();
    ops.follow(
      { operationId: 'reconcile-a', kind: 'reconcile', target: 'svc', step: 'replace' },
      run.promise,
    );
    off();
    ops.follow(fin(1), Promise.resolve());
    expect(begun).toEqual([
      { operationId: 'reconcile-a', kind: 'reconcile', target: 'svc', step: 'replace' },
    ]);
    run.reject(new SpcdError('UPGRADE_FAILED', 'rolled back'));
    expect(await ops.done('reconcile-a')).toMatchObject({
      phase: 'failed',
      error: { code: 'UPGRADE_FAILED' },
    });
    expect(events).toEqual([]);
  });

  it('refuses an id it has already (CONFLICT), publishing nothing for it', () => {
    const { ops, events } = owner();
    ops.track('restart-1', 'restart', 'svc', new Promise(() => undefined));
    expect(() => ops.track('restart-1', 'restart', 'svc', Promise.resolve())).toThrow(
      expect.objectContaining({ code: 'CONFLICT' }),
    );
    expect(events).toHaveLength(1);
  });
});

const fin = (i: number): OperationBegun => ({
  operationId: `reconcile-${i}`,
  kind: 'reconcile',
  target: `c${i}`,
});
