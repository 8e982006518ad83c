import { afterEach, describe, expect, it } from 'vitest';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { ADOPT_FAILPOINTS } from '../../agent/executor/failpoint.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import type { FakeContainer } from '../support/fake-engine.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired, fakeReconciler, settle, until } from '../support/fake-reconciler.js';
import { containerSpec } from '../support/spec.js';

/**
 * Adoption through the reconciler, against the fake engine and the fake
 * clock: a container spcd did not create runs under a desired name. spcd
 * creates nothing there, adopts it only on the operator's word, without a
 * stop or a start, keeps it after its own restart, heals it, replaces it
 * through the upgrade road, and reports (never fights) a new id under its name.
 */
const SPEC: ContainerSpec = containerSpec('nova_compute', { image: 'kolla/nova-compute:1' });

let procs: FakeProcess[] = [];
let recs: Reconciler[] = [];
afterEach(async () => {
  for (const r of recs) await r.stop();
  for (const p of procs) await p.close();
  procs = [];
  recs = [];
});

async function host(): Promise<{ p: FakeProcess; c: FakeContainer }> {
  const p = await FakeProcess.create();
  procs.push(p);
  p.engine.addImage(SPEC.image);
  const c = p.engine.addUnlabeled('nova_compute', SPEC.image);
  return { p, c };
}

async function spcd(p: FakeProcess, spec = SPEC): Promise<Reconciler> {
  const { rec } = fakeReconciler(p, { relistMs: 1_000 });
  recs.push(rec);
  await rec.start([desired(spec)]);
  return rec;
}

/** Calls that would change a container, other than reads. */
const changes = (p: FakeProcess): string[] =>
  p.engine.calls
    .filter((c) => ['create', 'start', 'stop', 'kill', 'remove', 'rename'].includes(c.kind))
    .map((c) => `${c.kind} ${c.arg}`);

async function adopted(p: FakeProcess, rec: Reconciler): Promise<unknown> {
  const result = rec.request('nova_compute', { verb: 'adopt', operation: { id: 'adopt-1', kind: 'adopt' } });
  await until(p.clock, 'adopted', () => p.deps.state.record('nova_compute')?.adopted !== undefined);
  return result;
}

/** The operator's adopt, which must fail: its error. */
async function refusal(p: FakeProcess, rec: Reconciler): Promise<unknown> {
  let refused: unknown;
  rec
    .request('nova_compute', { verb: 'adopt', operation: { id: 'a', kind: 'adopt' } })
    .catch((e: unknown) => {
      refused = e;
    });
  await until(p.clock, 'refused', () => refused !== undefined);
  return refused;
}

describe('adoption through the reconciler', () => {
  it('creates nothing under the name of an unlabeled container and waits for the operator', async () => {
    const { p } = await host();
    const rec = await spcd(p);
    await until(p.clock, 'a pass planned', () => rec.currentPlan().waiting.length > 0);
    expect(changes(p)).toEqual([]);
    expect(rec.currentPlan().adoptions).toEqual([{ container: 'nova_compute' }]);
    expect(rec.currentPlan().waiting[0]?.reason).toMatch(/^adopt: .*spcctl adopt apply/);
    expect(p.deps.state.record('nova_compute')?.adopted).toBeUndefined();
  });

  it("adopts on the operator's word as generation 1 with no stop, no start, the same id and StartedAt", async () => {
    const { p, c } = await host();
    const startedAt = c.startedAt;
    const rec = await spcd(p);
    await expect(adopted(p, rec)).resolves.toEqual({ generation: 1 });
    await until(p.clock, "listed as spcd's", () => rec.primary('nova_compute')?.id === c.id);
    expect(rec.primary('nova_compute')?.identity).toMatchObject({ generation: 1, container: 'nova_compute' });
    expect([c.id, c.startedAt, c.state]).toEqual([p.engine.byName('nova_compute')?.id, startedAt, 'running']);
    expect(changes(p)).toEqual([]);
    expect(p.deps.state.record('nova_compute')).toMatchObject({
      lastKnownGood: 1,
      adopted: { id: c.id, startedAt, generation: 1, operationId: 'adopt-1' },
    });
    expect(p.events).toContainEqual(expect.objectContaining({ type: 'state', to: 'adopted' }));
  });

  it('refuses to adopt a container that differs from its definition, and changes nothing', async () => {
    const { p, c } = await host();
    c.unlabeled = { differences: ['privileged: definition true, running none'] };
    const rec = await spcd(p);
    await until(p.clock, 'a pass planned', () => rec.currentPlan().waiting.length > 0);
    expect(rec.currentPlan().adoptions).toEqual([
      { container: 'nova_compute', blocked: expect.stringContaining('privileged: definition true') },
    ]);
    const refused = await refusal(p, rec);
    expect(refused).toMatchObject({ code: 'ADOPT_BLOCKED' });
    expect(p.deps.state.record('nova_compute')?.adopted).toBeUndefined();
    expect(changes(p)).toEqual([]);
  });

  it("refuses while kolla-ansible's unit could still stop or restart the container", async () => {
    const { p } = await host();
    p.deps = {
      ...p.deps,
      units: { supervisor: async (name) => `kolla-${name}-container.service is active` },
    };
    const rec = await spcd(p);
    const refused = await refusal(p, rec);
    expect(refused).toMatchObject({
      code: 'ADOPT_BLOCKED',
      message: expect.stringContaining('container.service is active'),
    });
    expect(p.deps.state.record('nova_compute')?.adopted).toBeUndefined();
    expect(changes(p)).toEqual([]);
  });

  it('keeps the adoption across a SIGKILL of spcd and a new spcd, still with no restart', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    p.engine.processKilled();
    const next = await p.restart();
    procs.push(next);
    const rec2 = await spcd(next);
    await until(
      next.clock,
      'the new spcd lists it as its own',
      () => rec2.primary('nova_compute')?.id === c.id,
    );
    await settle();
    expect(rec2.currentPlan().steps).toEqual([]);
    expect(changes(next)).toEqual([]);
  });

  for (const point of ADOPT_FAILPOINTS) {
    it(`after a SIGKILL at ${point}, the container is adopted or not, never half, and never restarted`, async () => {
      const { p, c } = await host();
      p.killAt = point;
      const rec = await spcd(p);
      rec
        .request('nova_compute', { verb: 'adopt', operation: { id: 'a', kind: 'adopt' } })
        .catch(() => undefined);
      await until(p.clock, 'killed', () => p.engine.killed());
      const next = await p.restart();
      procs.push(next);
      const rec2 = await spcd(next);
      await until(next.clock, 'a pass planned', () => next.engine.count('listManaged') > 0);
      await settle();
      const record = next.deps.state.record('nova_compute');
      if (point === 'adopt.before-record') {
        expect(record?.adopted).toBeUndefined();
        expect(record?.generations ?? []).toEqual([]);
        await until(next.clock, 'planned for adoption', () => rec2.currentPlan().adoptions !== undefined);
        expect(rec2.currentPlan().adoptions).toEqual([{ container: 'nova_compute' }]);
      } else {
        expect(record).toMatchObject({ adopted: { id: c.id, generation: 1 }, lastKnownGood: 1 });
        expect(record?.generations.map((g) => [g.generation, g.outcome])).toEqual([[1, 'current']]);
        await until(next.clock, 'listed as its own', () => rec2.primary('nova_compute')?.id === c.id);
      }
      expect(changes(p)).toEqual([]);
      expect([c.state, p.engine.byName('nova_compute')?.id]).toEqual(['running', c.id]);
    });
  }

  it('heals a crash by starting the same container again', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    p.engine.exit(c.id, 1);
    await until(p.clock, 'started again', () => c.state === 'running');
    expect(changes(p)).toEqual([`start ${c.id}`]);
    expect(p.engine.byName('nova_compute')?.id).toBe(c.id);
  });

  it('replaces it with a labelled generation 2 when the definition changes, and forgets the adoption', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    const v2 = { ...SPEC, image: 'kolla/nova-compute:2' };
    p.engine.addImage(v2.image);
    rec.setDesired([desired(v2)]);
    await until(
      p.clock,
      'generation 2 runs and the adopted one is gone',
      () => rec.primary('nova_compute')?.identity.generation === 2 && !p.engine.containers.has(c.id),
    );
    const now = p.engine.byName('nova_compute');
    expect(now).toMatchObject({ image: v2.image, state: 'running' });
    expect(now?.unlabeled).toBeUndefined();
    expect(now?.identity).toMatchObject({ generation: 2, container: 'nova_compute' });
    expect(p.deps.state.record('nova_compute')?.adopted).toBeUndefined();
  });

  it('releases an adoption: the container runs on untouched and is adoptable again', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    const released = await rec.releaseAdoption('nova_compute', 'rel');
    expect(released).toEqual({ container: 'nova_compute', id: c.id, generation: 1 });
    await until(p.clock, 'adoptable again', () => rec.currentPlan().adoptions !== undefined);
    expect(rec.currentPlan().adoptions).toEqual([{ container: 'nova_compute' }]);
    expect(rec.primary('nova_compute')).toBeUndefined();
    expect(p.deps.state.record('nova_compute')).toMatchObject({ adopted: undefined, lastKnownGood: null });
    expect(changes(p)).toEqual([]);
    expect([c.state, c.startedAt]).toEqual(['running', p.engine.byName('nova_compute')?.startedAt]);
  });

  it('a release is no step: it answers while a pass waits on the engine, holding the container meanwhile', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    p.engine.fault({ kind: 'listManaged', nth: 1, hang: true });
    rec.trigger();
    await until(p.clock, 'a pass waits on its listing', () => p.engine.hanging().includes('listManaged'));
    const releasing = rec.releaseAdoption('nova_compute', 'rel');
    expect(rec.factsOf('nova_compute').operation).toEqual({ id: 'rel', kind: 'adopt' });
    await expect(releasing).resolves.toMatchObject({ container: 'nova_compute', id: c.id });
    expect(rec.factsOf('nova_compute').operation).toBeNull();
    expect(p.deps.state.record('nova_compute')?.adopted).toBeUndefined();
    p.engine.answerHung('listManaged');
    expect(changes(p)).toEqual([]);
  });

  it('a release is refused NOT_FOUND when not adopted, and CONFLICT while an operation holds the container', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await expect(rec.releaseAdoption('nova_compute', 'rel-1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(rec.factsOf('nova_compute')).toMatchObject({ operation: null, lastError: { code: 'NOT_FOUND' } });
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    p.engine.fault({ kind: 'stop', nth: 1, hang: true });
    const restart = rec.request('nova_compute', { verb: 'restart', operation: { id: 'r', kind: 'restart' } });
    await until(p.clock, 'the restart has it locked', () => p.engine.hanging().includes('stop'));
    await expect(rec.releaseAdoption('nova_compute', 'rel-2')).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(p.deps.state.record('nova_compute')?.adopted).toMatchObject({ id: c.id });
    p.engine.answerHung('stop');
    await restart;
  });

  it('reports a new id under an adopted name, once, and does not touch it', async () => {
    const { p, c } = await host();
    const rec = await spcd(p);
    await adopted(p, rec);
    await until(p.clock, 'listed', () => rec.primary('nova_compute')?.id === c.id);
    // Someone else recreates it (e.g. the old manager): a new id under the same name.
    p.engine.containers.delete(c.id);
    const other = p.engine.addUnlabeled('nova_compute', SPEC.image);
    await until(p.clock, 'reported', () =>
      p.events.some((e) => e.type === 'state' && e.to === 'changed-under-spcd'),
    );
    await until(p.clock, 'planned', () => rec.currentPlan().adoptions !== undefined);
    await settle();
    expect(rec.currentPlan().adoptions?.[0]?.blocked).toMatch(/^changed under spcd/);
    expect(changes(p)).toEqual([]);
    expect(p.events.filter((e) => e.type === 'state' && e.to === 'changed-under-spcd')).toHaveLength(1);
    expect(p.engine.byName('nova_compute')?.id).toBe(other.id);
  });
});
