import { describe, expect, it } from 'vitest';
import { plan, stepContainer } from '../../agent/planner/plan.js';
import { NO_FACTS, type RuntimeFacts, type Step } from '../../agent/planner/types.js';
import { BY_HEAL, byOperator, desiredOf, observedOf, upgradeIntent } from '../support/planner.js';
import { containerSpec } from '../support/spec.js';

/**
 * The planner's requests (decision 0023): the operator's intent, a heal, the
 * preflight block and the reason what runs is kept (definitions not loaded) are inputs; every step comes out of
 * plan().
 */
const NOW = 1_000_000;
const A = desiredOf(containerSpec('a'));
const A2 = desiredOf(containerSpec('a', { image: 'img:2' }));
const facts = (f: Partial<RuntimeFacts>): Map<string, RuntimeFacts> =>
  new Map([['a', { ...NO_FACTS, ...f }]]);
const op = { id: 'restart-1', kind: 'restart' } as const;
const brief = (steps: readonly Step[]): string[] =>
  steps.map((s) => `${s.kind}:${s.kind === 'remove' ? s.observed.name : stepContainer(s)}`);

describe('the operator intent', () => {
  it('comes first: a restart intent is the only step for its container, even when its spec changed', () => {
    const running = observedOf(A);
    const p = plan({
      desired: [A2],
      observed: [running],
      facts: facts({ intent: { verb: 'restart', operation: op } }),
      now: NOW,
    });
    expect(p.steps).toEqual([
      {
        kind: 'restart',
        desired: A2,
        observed: running,
        reason: 'restart requested',
        origin: byOperator(op),
      },
    ]);
  });

  it('becomes the step of its verb, with or without an instance', () => {
    const verbs = ['restart', 'stop', 'start'] as const;
    for (const verb of verbs) {
      const p = plan({
        desired: [A],
        observed: [],
        facts: facts({ intent: { verb, operation: op } }),
        now: NOW,
      });
      expect(p.steps).toMatchObject([{ kind: verb, observed: undefined, origin: byOperator(op) }]);
    }
  });

  it('an upgrade intent becomes an upgrade step carrying it, past the preflight block and while what runs is kept', () => {
    const intent = upgradeIntent(A2.spec, A.specHash);
    const p = plan({
      desired: [A],
      observed: [observedOf(A)],
      facts: facts({ intent }),
      now: NOW,
      createBlock: 'disk full',
      keptBecause: 'bad yaml',
    });
    expect(p.steps).toMatchObject([{ kind: 'upgrade', intent }]);
  });

  it('waits while an operation has the container locked', () => {
    const p = plan({
      desired: [A],
      observed: [observedOf(A)],
      facts: facts({ busy: true, intent: { verb: 'stop', operation: op } }),
      now: NOW,
    });
    expect(p.steps).toEqual([]);
  });
});

describe('a heal', () => {
  const heal = { reason: 'check probe failed 3 times' };

  it('restarts what runs, waits for its backoff, and stops it once spcd gave up', () => {
    const running = observedOf(A);
    const now = plan({ desired: [A], observed: [running], facts: facts({ heal }), now: NOW });
    expect(now.steps).toEqual([
      { kind: 'restart', desired: A, observed: running, reason: heal.reason, origin: BY_HEAL },
    ]);

    const later = plan({
      desired: [A],
      observed: [running],
      facts: facts({ heal, nextAttemptAt: NOW + 5_000 }),
      now: NOW,
    });
    expect(later.steps).toEqual([]);
    expect(later.waiting).toEqual([{ container: 'a', reason: 'heal waits for its backoff' }]);
    expect(later.wakeAt).toBe(NOW + 5_000);

    const failed = plan({
      desired: [A],
      observed: [running],
      facts: facts({ heal, failed: true }),
      now: NOW,
    });
    expect(failed.steps).toEqual([
      { kind: 'stop', desired: A, observed: running, reason: heal.reason, origin: BY_HEAL },
    ]);
  });

  it('gives way to a replace when the definition changed', () => {
    const p = plan({ desired: [A2], observed: [observedOf(A)], facts: facts({ heal }), now: NOW });
    expect(brief(p.steps)).toEqual(['replace:a']);
  });
});

describe('the preflight block and what runs kept while the definitions cannot be read', () => {
  const B = desiredOf(containerSpec('b'));
  const stray = observedOf(desiredOf(containerSpec('gone')));

  it('a blocking preflight blocks creates only', () => {
    const p = plan({
      desired: [A, B],
      observed: [observedOf(A2)],
      facts: new Map(),
      now: NOW,
      createBlock: 'disk full',
    });
    expect(brief(p.steps)).toEqual(['replace:a']);
    expect(p.waiting).toEqual([{ container: 'b', reason: 'preflight blocks: disk full' }]);
  });

  it('while what runs is kept: starts go on; creates, replaces and removes wait', () => {
    const exited = observedOf(B, { state: 'exited', exitCode: 1 });
    const p = plan({
      desired: [A, B],
      observed: [observedOf(A2), exited, stray],
      facts: new Map(),
      now: NOW,
      keptBecause: 'bad yaml',
    });
    expect(brief(p.steps)).toEqual(['start:b']);
    expect(p.waiting.map((w) => w.reason)).toEqual([
      'definitions not loaded: bad yaml',
      'definitions not loaded: bad yaml',
    ]);
  });
});
