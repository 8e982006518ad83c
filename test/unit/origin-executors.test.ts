import { describe, expect, it } from 'vitest';
import { byOrigin, RESTART, START, STOP, type ByOrigin } from '../../agent/reconciler/origin-executors.js';
import type { StepContext } from '../../agent/reconciler/steps.js';
import type { Step } from '../../agent/planner/types.js';

/**
 * The kinds whose work depends on who asked (decision 0071): each origin
 * the kind allows has its function, and the step's origin picks it.
 */
describe('executors by origin', () => {
  const ctx = {} as StepContext;
  const step = (by: 'operator' | 'heal'): Step<'restart'> =>
    ({
      kind: 'restart',
      desired: {},
      observed: undefined,
      reason: 'r',
      origin: by === 'operator' ? { by, operation: { id: 'op-1', kind: 'restart' } } : { by },
    }) as unknown as Step<'restart'>;

  it("runs the function of the step's origin, and only it", async () => {
    const ran: string[] = [];
    const table: ByOrigin<'restart'> = {
      operator: async (s) => void ran.push(`operator:${s.origin.operation.id}`),
      heal: async (s) => void ran.push(`heal:${s.reason}`),
    };
    const run = byOrigin(table);
    await run(step('heal'), ctx);
    await run(step('operator'), ctx);
    expect(ran).toEqual(['heal:r', 'operator:op-1']);
  });

  it('has one function for each origin each kind allows, and no other', () => {
    expect(Object.keys(START).sort()).toEqual(['operator', 'plan']);
    expect(Object.keys(STOP).sort()).toEqual(['heal', 'operator']);
    expect(Object.keys(RESTART).sort()).toEqual(['heal', 'operator']);
  });

  it('does not compile without a function for an origin the kind allows', () => {
    const h = async (): Promise<undefined> => undefined;
    // @ts-expect-error a restart may be a heal's: the table must say what a heal's does
    const missing: ByOrigin<'restart'> = { operator: h };
    // @ts-expect-error a start is never a heal's
    const extra: ByOrigin<'start'> = { operator: h, plan: h, heal: h };
    expect(Object.keys(missing)).toEqual(['operator']);
    expect(Object.keys(extra)).toHaveLength(3);
  });
});
