import { afterEach, describe, expect, it } from 'vitest';
import { plan, stepContainer } from '../../agent/planner/plan.js';
import { NO_FACTS, type RuntimeFacts } from '../../agent/planner/types.js';
import type { Reconciler } from '../../agent/reconciler/reconciler.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired, fakeReconciler, run, until } from '../support/fake-reconciler.js';
import { desiredOf, observedOf } from '../support/planner.js';
import { amqpCheck, containerSpec } from '../support/spec.js';

/**
 * depends_on waits for a dependency to be ready, not only running: after a
 * restart of the whole engine every container is down at once, and a
 * service started beside a database that does not answer yet can stay
 * broken for good (neutron-server's plugins). A dependency with checks is
 * ready once they pass; one without checks, once it runs.
 */
const NOW = 1_000_000;
const DB = containerSpec('db', { healthchecks: [amqpCheck('db')] });
const API = containerSpec('api', { dependsOn: ['db'] });

describe('the planner starts a dependent once its dependency is ready', () => {
  const facts = (db: Partial<RuntimeFacts>): Map<string, RuntimeFacts> =>
    new Map([['db', { ...NO_FACTS, ...db }]]);
  const planWith = (db: Partial<RuntimeFacts>) =>
    plan({
      desired: [desiredOf(DB), desiredOf(API)],
      observed: [observedOf(desiredOf(DB))],
      facts: facts(db),
      now: NOW,
    });

  it('waits while the running dependency is not ready, and names it', () => {
    const p = planWith({ ready: false });
    expect(p.steps).toEqual([]);
    expect(p.waiting).toEqual([{ container: 'api', reason: 'waiting for db' }]);
  });

  it('creates the dependent once the dependency is ready, or when readiness is not known', () => {
    for (const db of [{ ready: true }, {}]) {
      const p = planWith(db);
      expect(p.steps.map((s) => [s.kind, s.kind === 'remove' ? '' : stepContainer(s)])).toEqual([
        ['create', 'api'],
      ]);
    }
  });

  it('starts an exited dependent only once the dependency is ready again', () => {
    const api = observedOf(desiredOf(API), { state: 'exited' });
    const input = (ready: boolean) => ({
      desired: [desiredOf(DB), desiredOf(API)],
      observed: [observedOf(desiredOf(DB)), api],
      facts: facts({ ready }),
      now: NOW,
    });
    expect(plan(input(false)).steps).toEqual([]);
    expect(plan(input(true)).steps.map((s) => s.kind)).toEqual(['start']);
  });
});

describe('the reconciler', () => {
  const open: { p: FakeProcess; rec: Reconciler }[] = [];
  afterEach(async () => {
    for (const { p, rec } of open.splice(0)) {
      await rec.stop();
      await p.close();
    }
  });

  it('creates the dependent when the health room says the dependency turned healthy, without waiting for a re-list', async () => {
    const p = await FakeProcess.create();
    for (const s of [DB, API]) p.engine.addImage(s.image);
    // A re-list an hour away: only the health change can bring the next pass.
    const { rec, room } = fakeReconciler(p, { relistMs: 3_600_000 });
    open.push({ p, rec });
    void rec.start([desired(DB), desired(API)]);
    await until(p.clock, 'db watched', () => room.watches.has('db'));
    await run(p.clock, 30_000);
    expect(p.engine.byName('api')).toBeUndefined();
    expect(rec.currentPlan().waiting).toContainEqual({ container: 'api', reason: 'waiting for db' });
    room.setStatus('db', 'healthy');
    await until(p.clock, 'api created', () => p.engine.byName('api') !== undefined, { maxFakeMs: 60_000 });
  });
});
