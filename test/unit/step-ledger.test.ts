import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { DEFAULT_BACKOFF } from '../../agent/model/backoff.js';
import type { HealOrigin, OperatorOrigin, Step } from '../../agent/planner/types.js';
import { ContainerLedger } from '../../agent/reconciler/ledger.js';
import { stepFailed, stepLaunched } from '../../agent/reconciler/step-ledger.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired } from '../support/fake-reconciler.js';
import { BY_HEAL, BY_PLAN, byOperator } from '../support/planner.js';
import { containerSpec } from '../support/spec.js';
import { stepRunner } from '../support/steps.js';

/**
 * The launcher alone records a step in the ledger, by the effects declared
 * per step kind (agent/reconciler/step-ledger.ts); the executors read none.
 * Fake engine, fake clock.
 */
const SVC = containerSpec('svc', { image: 'img:1' });
const OP = { id: 'op', kind: 'start' } as const;

let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

async function setup() {
  const p = await FakeProcess.create();
  proc = p;
  p.engine.addImage(SVC.image);
  const ledger = new ContainerLedger(DEFAULT_BACKOFF);
  const step = stepRunner(ledger, p.deps);
  return { p, ledger, step };
}

describe('the ledger effects of a step', () => {
  it('a create that fails still counts as an attempt and shows its error; one that succeeds clears it', async () => {
    const { p, ledger, step } = await setup();
    p.engine.fault({ kind: 'create', nth: 1, fail: new SpcdError('ENGINE_FAILED', 'no room') });
    const create: Step = { kind: 'create', desired: desired(SVC), reason: 'not present', origin: BY_PLAN };
    const at = p.clock.now();
    await expect(step(create)).rejects.toThrow('no room');
    expect(ledger.of('svc')).toMatchObject({
      backoff: { lastStartAt: at },
      lastError: { code: 'ENGINE_FAILED', message: 'no room' },
    });
    await step(create);
    expect(ledger.of('svc').lastError).toBeNull();
  });

  it("a check's stop takes the pending heal and gives the event why spcd stopped trying", async () => {
    const { p, ledger, step } = await setup();
    const observed = await p.first(SVC);
    ledger.unhealthy('svc', 'stop', 'check probe failed: down', 'check probe failed 3 times: down', 0);
    await step({ kind: 'stop', desired: desired(SVC), observed, reason: 'planned', origin: BY_HEAL });
    expect(ledger.of('svc').pendingHeal).toBeNull();
    const failed = p.events.filter((e) => e.type === 'state' && e.to === 'failed');
    expect(failed).toMatchObject([{ reason: 'check probe failed: down' }]);
  });

  it("the operator's start ends the failure once its stop is undone", async () => {
    const { p, ledger, step } = await setup();
    const observed = await p.first(SVC);
    ledger.unhealthy('svc', 'stop', 'check probe failed: down', 'r', 0);
    await step({ kind: 'start', desired: desired(SVC), observed, reason: 'r', origin: byOperator(OP) });
    expect(ledger.of('svc')).toMatchObject({ failed: null, pendingHeal: null });
  });

  it("at launch the operator's step takes a pending heal; a planned step's failure alone is counted", () => {
    const ledger = new ContainerLedger(DEFAULT_BACKOFF);
    const restart = (origin: OperatorOrigin | HealOrigin): Step => ({
      kind: 'restart',
      desired: desired(SVC),
      observed: undefined,
      reason: 'r',
      origin,
    });
    const planned: Step = {
      kind: 'start',
      desired: desired(SVC),
      observed: undefined,
      reason: 'r',
      origin: BY_PLAN,
    };
    ledger.unhealthy('svc', 'restart', 'f', 'r', 0);
    stepLaunched(ledger, restart(BY_HEAL));
    expect(ledger.of('svc').pendingHeal).not.toBeNull();
    stepLaunched(ledger, restart(byOperator(OP)));
    expect(ledger.of('svc').pendingHeal).toBeNull();
    const e = new SpcdError('ENGINE_FAILED', 'boom');
    expect(stepFailed(ledger, restart(BY_HEAL), e, 0)).toBe(false);
    expect(stepFailed(ledger, restart(byOperator(OP)), e, 0)).toBe(false);
    expect(stepFailed(ledger, planned, new SpcdError('CONFLICT', 'locked'), 0)).toBe(false);
    expect(ledger.of('svc').backoff.failures).toBe(1);
    expect(stepFailed(ledger, planned, e, 0)).toBe(true);
    expect(ledger.of('svc')).toMatchObject({
      backoff: { failures: 2 },
      lastError: { code: 'ENGINE_FAILED' },
    });
  });

  it('a create the engine cannot run is given up, and tried again once its own definition changes', async () => {
    const { p, ledger, step } = await setup();
    p.engine.fault({
      kind: 'create',
      nth: 1,
      fail: new SpcdError('ENGINE_UNSUPPORTED', 'init with pid host'),
    });
    const create: Step = { kind: 'create', desired: desired(SVC), reason: 'not present', origin: BY_PLAN };
    const e = await step(create).then(
      () => undefined,
      (err: unknown) => err as SpcdError,
    );
    expect(e?.code).toBe('ENGINE_UNSUPPORTED');
    expect(stepFailed(ledger, create, e!, p.clock.now())).toBe(true);
    expect(ledger.of('svc').failed).toBe('init with pid host');
    const other = containerSpec('other', { image: 'img:1' });
    ledger.definitionsReplaced([desired(SVC), desired(other)], [desired(SVC), desired(other)]);
    expect(ledger.of('svc').failed, 'the same definitions').toBe('init with pid host');
    const changed = containerSpec('svc', { image: 'img:1', init: false });
    const redefined = { ...desired(changed), specHash: `${desired(SVC).specHash}-changed` };
    ledger.definitionsReplaced([desired(SVC)], [redefined, desired(other)]);
    expect(ledger.of('svc').failed).toBeNull();
    expect(ledger.of('other').failed).toBeNull();
  });
});
