import { rmSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import { STATE_WRITE_RETRY_MS } from '../../agent/reconciler/quarantine-retry.js';
import type { FakeProcess } from '../support/fake-executor.js';
import { desired, run, runningReconcilers, until } from '../support/fake-reconciler.js';
import { containerSpec } from '../support/spec.js';

/**
 * A quarantine that a full state disk caused ends by itself once the disk
 * takes writes again: an upgrade fails, its rollback puts the old instance
 * back but cannot write the outcome (ENOSPC), the container is quarantined;
 * spcd tries its journal entry again after 5 s, 10 s, ... and supervises it
 * again once the write goes through. Any other quarantine waits for the
 * operator. Fake engine, fake clock, real state files.
 */
const V1 = containerSpec('svc', { image: 'img:1' });
const V2 = containerSpec('svc', { image: 'img:2' });

const start = runningReconcilers();
const runningV1 = (): Promise<{ p: FakeProcess; rec: Reconciler }> => start([V1], [V1.image, V2.image]);

const quarantineEvents = (p: FakeProcess): string[] =>
  p.events.flatMap((e) =>
    e.type === 'state' && (e.to === 'quarantined' || e.to === 'recovered') ? [e.to] : [],
  );

describe('a quarantine caused by a full state disk', () => {
  it('is tried again with backoff and ends once the disk has room; the upgrade then goes on', async () => {
    const { p, rec } = await runningV1();
    const oldId = p.engine.byName('svc')?.id;
    // The disk fills once the new instance exists; its start fails, so the upgrade rolls back.
    p.onFailpoint = (point) => {
      if (point === 'upgrade.after-create') p.stateFs.full = true;
    };
    p.engine.fault({ kind: 'start', nth: 1, fail: new SpcdError('ENGINE_FAILED', 'start refused') });
    rec.setDesired([desired(V2)]);
    await until(p.clock, 'quarantined', () => rec.quarantine.get('svc') !== undefined);
    p.onFailpoint = undefined;
    const q = rec.quarantine.get('svc')!;
    expect(q.stateWrite).toBe(true);
    expect(q.reason).toMatch(/ROLLBACK_FAILED.*STATE_WRITE_FAILED|ROLLBACK_FAILED.*ENOSPC/);
    // The rollback's engine side is done: the old instance runs under the name.
    expect(p.engine.byName('svc')).toMatchObject({ id: oldId, state: 'running' });
    expect(await p.deps.journal.read('svc')).toBeDefined();

    // Still full at the first retry (5 s): the recovery fails the same way, it stays quarantined.
    const first = await until(
      p.clock,
      'the first retry',
      () => /^undoing the upgrade/.test(rec.quarantine.get('svc')?.reason ?? ''),
      // Any time before the second try (5 s + 10 s): the try's own writes take real time.
      { stepMs: 100, maxFakeMs: STATE_WRITE_RETRY_MS + 4_000 },
    );
    expect(first).toBeGreaterThanOrEqual(STATE_WRITE_RETRY_MS - 500);
    expect(rec.quarantine.get('svc')?.reason).toMatch(/STATE_WRITE_FAILED/);
    expect(p.engine.byName('svc')).toMatchObject({ id: oldId, state: 'running' });

    // Room again: nothing happens before the next retry, 10 s after the first; that one ends it.
    p.stateFs.full = false;
    await run(p.clock, 2 * STATE_WRITE_RETRY_MS - 1_000, 250);
    expect(rec.quarantine.get('svc')).toBeDefined();
    // The second try, due 10 s after the first, ends it; a third would come 20 s later.
    await until(p.clock, 'the quarantine ends', () => rec.quarantine.get('svc') === undefined, {
      stepMs: 100,
      maxFakeMs: 9_000,
    });
    expect(await p.deps.journal.read('svc')).toBeUndefined();
    expect(p.deps.state.record('svc')?.generations.find((g) => g.generation === 2)?.outcome).toBe(
      'rolled-back',
    );
    // Quarantined, its reason changed by the first retry, recovered.
    expect(quarantineEvents(p)).toEqual(['quarantined', 'quarantined', 'recovered']);

    // Supervised again: the desired image is tried again, and this time it starts.
    await until(
      p.clock,
      'img:2 running',
      () => p.engine.byName('svc')?.image === V2.image && rec.primary('svc')?.state === 'running',
    );
    expect(rec.quarantine.names()).toEqual([]);
  });

  it('not any other quarantine: that one waits for the operator (a reload)', async () => {
    const { p, rec } = await runningV1();
    const file = p.deps.journal.fileOf('svc');
    rec.quarantine.add({
      container: 'svc',
      file,
      reason: 'ROLLBACK_FAILED: old instance gone',
      entry: undefined,
    });
    await run(p.clock, 300_000, 5_000);
    expect(rec.quarantine.get('svc')?.reason).toBe('ROLLBACK_FAILED: old instance gone');
    // The operator's reload tries it as a `recover` step of the next pass (no entry on disk: it ends).
    const left = rec.retryQuarantined();
    await until(p.clock, "the reload's retry", () => rec.quarantine.get('svc') === undefined);
    const ended = await left;
    expect(ended).toEqual({
      quarantined: [],
      operations: [
        { operationId: expect.any(String), kind: 'recover', container: 'svc', outcome: 'cleared' },
      ],
    });
    // The retry's operation is the one the owner of operations knows.
    expect(await rec.operations.done(ended.operations[0]!.operationId)).toMatchObject({
      phase: 'succeeded',
      kind: 'recover',
      target: 'svc',
      result: { quarantined: false },
    });

    rec.quarantine.add({
      container: 'svc',
      file,
      reason: 'ROLLBACK_FAILED: STATE_WRITE_FAILED',
      entry: undefined,
      stateWrite: true,
    });
    await until(p.clock, 'ended by itself', () => rec.quarantine.get('svc') === undefined, {
      stepMs: 100,
      // The first try (5 s), not a second one (15 s).
      maxFakeMs: 2 * STATE_WRITE_RETRY_MS,
    });
  });

  it("a reload names each retry's operation, and one that stays quarantined says so", async () => {
    const { p, rec } = await runningV1();
    await run(p.clock, 5_000);
    // An entry on disk that cannot be read: its retry ends, the container stays quarantined.
    const file = p.deps.journal.fileOf('svc');
    writeFileSync(file, '{ not json');
    rec.quarantine.add({ container: 'svc', file, reason: 'malformed journal entry', entry: undefined });
    // The retry reads real files: the fake clock goes on until it has ended, however slow the disk.
    let over = false;
    const left = rec.retryQuarantined().finally(() => (over = true));
    await until(p.clock, 'the retry ended', () => over, { stepMs: 100 });
    const ended = await left;
    expect(ended.quarantined).toEqual(['svc']);
    expect(ended.operations).toEqual([
      { operationId: expect.any(String), kind: 'recover', container: 'svc', outcome: 'quarantined' },
    ]);
    const id = ended.operations[0]!.operationId;
    expect(await rec.operations.done(id)).toMatchObject({ phase: 'succeeded' });
    // Followed on the bus by its id, as the API's operations are.
    const phases = p.events.flatMap((e) => (e.type === 'operation' && e.operationId === id ? [e.phase] : []));
    expect(phases).toEqual(['accepted', 'succeeded']);
    // Nothing quarantined: nothing to retry, no operation.
    rmSync(file);
    rec.quarantine.clear('svc', 'test');
    expect(await rec.retryQuarantined()).toEqual({ quarantined: [], operations: [] });
  });
});
