import { describe, expect, it } from 'vitest';
import { applyClusterGlobals, type ClusterGlobalsDeps } from '../../agent/config/cluster-globals.js';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { EventBus } from '../../agent/model/events.js';
import type { DesiredContainer } from '../../agent/planner/types.js';
import { Operations } from '../../agent/reconciler/operations.js';
import { FakeClock } from '../support/fake-clock.js';
import { containerSpec } from '../support/spec.js';

/**
 * The cluster globals wait for the recreates a reload causes through the
 * owner of operations (decision 0058): each pass's `replace` operation on a
 * container whose rendered config changed, with `done(id)`. Fake clock; the
 * pass is played by the test.
 */
const DEADLINE_MS = 30 * 60_000;

function rig(names: string[]) {
  const clock = new FakeClock();
  const operations = new Operations({ events: new EventBus(), clock, log: silentLogger() });
  let desired: DesiredContainer[] = names.map((n) => ({
    spec: containerSpec(n),
    specHash: `spec-${n}`,
    configHash: `old-${n}`,
  }));
  let seq = 0;
  /** A pass's operation on `target` that ends as `end` says. */
  const step = (target: string, kind: string, end: () => Promise<void>): void =>
    operations.follow({ operationId: `reconcile-${++seq}`, kind: 'reconcile', target, step: kind }, end());
  const deps = (changed: string[], pass: () => void): ClusterGlobalsDeps => ({
    reloadWithGlobals: async () => {
      desired = desired.map((d) =>
        changed.includes(d.spec.name) ? { ...d, configHash: `new-${d.spec.name}` } : d,
      );
      pass();
      return {};
    },
    desired: () => desired,
    operations,
    clock,
    deadlineMs: DEADLINE_MS,
  });
  return { clock, step, deps };
}

const ok = (): Promise<void> => Promise.resolve();
const fails = (code: 'UPGRADE_FAILED' | 'CONFLICT') => (): Promise<void> =>
  Promise.reject(new SpcdError(code, code === 'CONFLICT' ? 'locked' : 'gate failed; rolled back'));

describe('cluster globals wait for their recreates with done(id)', () => {
  it('resolves the containers recreated once each replace succeeded; a heal on one is not its recreate', async () => {
    const { step, deps } = rig(['a', 'b', 'c']);
    let later!: () => void;
    const applied = applyClusterGlobals(
      deps(['a', 'b'], () => {
        step('a', 'restart', fails('UPGRADE_FAILED'));
        step('a', 'replace', ok);
        later = () => step('b', 'replace', ok);
      }),
      { level: 7 },
    );
    await Promise.resolve();
    await Promise.resolve();
    later();
    await expect(applied).resolves.toEqual(['a', 'b']);
  });

  it('rejects UPGRADE_FAILED naming the ones that failed and rolled back', async () => {
    const { step, deps } = rig(['a', 'b']);
    const applied = applyClusterGlobals(
      deps(['a', 'b'], () => {
        step('a', 'replace', ok);
        step('b', 'replace', fails('UPGRADE_FAILED'));
      }),
      {},
    );
    await expect(applied).rejects.toMatchObject({
      code: 'UPGRADE_FAILED',
      message: 'cluster globals: b rolled back',
      details: { containers: ['b'] },
    });
  });

  it('a recreate that never ran (CONFLICT) is not an outcome: the next one is', async () => {
    const { step, deps } = rig(['a']);
    const applied = applyClusterGlobals(
      deps(['a'], () => {
        step('a', 'replace', fails('CONFLICT'));
        step('a', 'replace', ok);
      }),
      {},
    );
    await expect(applied).resolves.toEqual(['a']);
  });

  it('rejects at the deadline, on the clock, naming the ones not recreated', async () => {
    const { clock, step, deps } = rig(['a', 'b']);
    const applied = applyClusterGlobals(
      deps(['a', 'b'], () => step('a', 'replace', ok)),
      {},
    );
    const settled = applied.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    for (let i = 0; i < 5; i++) await Promise.resolve();
    clock.advance(DEADLINE_MS - 1);
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(clock.pending()).toBe(1);
    clock.advance(1);
    expect(await settled).toMatchObject({
      code: 'UPGRADE_FAILED',
      message: 'cluster globals: b not recreated in time',
    });
  });
});
