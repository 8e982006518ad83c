import { describe, expect, it } from 'vitest';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { plan, stepContainer } from '../../agent/planner/plan.js';
import {
  NO_FACTS,
  type DesiredContainer,
  type Quarantined,
  type RecoverOrigin,
} from '../../agent/planner/types.js';
import { containerSpec } from '../support/spec.js';
import { desiredOf, observedOf } from '../support/planner.js';

/**
 * The planner and the journal: an instance an unresolved (quarantined)
 * journal entry references is never removed as an "extra instance", and a
 * target that failed and was rolled back is not retried until the
 * definition changes. Pure: the journal arrives as data.
 */
const desired = desiredOf;
const instance = (
  d: DesiredContainer,
  gen: number,
  over: Partial<ObservedContainer> = {},
): ObservedContainer => observedOf(d, over, gen);

const NOW = 1_000_000;
const quarantined = (name: string, reason = 'undo failed'): Map<string, Quarantined> =>
  new Map([[name, { reason }]]);

describe('planner with the journal', () => {
  // A rollback whose stop of the new one ran into its deadline: new under the name, old parked and stopped.
  const oldD = desired(containerSpec('svc', { image: 'img:1' }));
  const newD = desired(containerSpec('svc', { image: 'img:2' }));
  const parked = instance(oldD, 3, {
    name: 'svc.g3.old',
    state: 'exited',
    finishedAt: '2026-01-01T00:01:00Z',
  });
  const fresh = instance(newD, 4);
  const other = desired(containerSpec('other'));
  const otherExited = instance(other, 1, {
    state: 'exited',
    finishedAt: '2026-01-01T00:02:00Z',
    exitCode: 137,
  });

  it('without the journal the parked old instance is removed as an extra instance (the hazard)', () => {
    const p = plan({ desired: [newD], observed: [fresh, parked], facts: new Map(), now: NOW });
    expect(p.steps).toMatchObject([{ kind: 'remove', observed: { id: parked.id } }]);
  });

  it("plans a quarantine's retry as a recover step, and nothing else for it, when one was asked and it is not locked", () => {
    const reload = { by: 'operator', operation: { id: 'reload-recover-1', kind: 'recover' } } as const;
    const input = {
      desired: [newD, other],
      observed: [fresh, parked, otherExited],
      now: NOW,
      journal: quarantined('svc'),
      recover: new Map<string, RecoverOrigin>([
        ['svc', reload],
        ['other', { by: 'plan' } as const],
      ]),
    };
    const p = plan({ ...input, facts: new Map() });
    // `other` is not quarantined: a retry asked for it plans nothing.
    expect(p.steps).toEqual([
      { kind: 'recover', container: 'svc', reason: 'journal entry tried again', origin: reload },
      expect.objectContaining({ kind: 'start' }),
    ]);
    const locked = plan({ ...input, facts: new Map([['svc', { ...NO_FACTS, busy: true }]]) });
    expect(locked.steps.map((s) => s.kind)).toEqual(['start']);
  });

  it('never removes an instance of a quarantined container, and still heals the others', () => {
    const p = plan({
      desired: [newD, other],
      observed: [fresh, parked, otherExited],
      facts: new Map(),
      now: NOW,
      journal: quarantined('svc'),
    });
    expect(p.steps.map((s) => [s.kind, s.kind === 'remove' ? s.observed.id : stepContainer(s)])).toEqual([
      ['start', 'other'],
    ]);
    expect(p.waiting).toEqual([{ container: 'svc', reason: 'undo failed' }]);
  });

  it('neither replaces nor restarts a quarantined container, nor creates one', () => {
    const stopped = instance(oldD, 3, { state: 'exited', finishedAt: '2026-01-01T00:01:00Z' });
    const p = plan({
      desired: [newD],
      observed: [stopped],
      facts: new Map(),
      now: NOW,
      journal: quarantined('svc'),
    });
    expect(p.steps).toEqual([]);
    const q = plan({
      desired: [newD],
      observed: [],
      facts: new Map(),
      now: NOW,
      journal: quarantined('svc'),
    });
    expect(q.steps).toEqual([]);
  });

  it('keeps the instances of a quarantined container whose definition was deleted', () => {
    const p = plan({
      desired: [],
      observed: [fresh, parked],
      facts: new Map(),
      now: NOW,
      journal: quarantined('svc'),
    });
    expect(p.steps).toEqual([]);
    expect(p.waiting).toEqual([{ container: 'svc', reason: 'undo failed' }]);
  });

  it('does not retry a target that failed and was rolled back, until the definition changes', () => {
    const running = instance(oldD, 3);
    const failedTarget = { specHash: newD.specHash, configHash: newD.configHash, generation: 4 };
    const facts = new Map([['svc', { ...NO_FACTS, failedTarget }]]);
    const p = plan({ desired: [newD], observed: [running], facts, now: NOW });
    expect(p.steps).toEqual([]);
    expect(p.waiting[0]?.reason).toMatch(/generation 4 of this definition failed and was rolled back/);
    // The rolled-back old one is still healed when it exits.
    const exited = instance(oldD, 3, { state: 'exited', finishedAt: '2026-01-01T00:03:00Z' });
    expect(plan({ desired: [newD], observed: [exited], facts, now: NOW }).steps).toMatchObject([
      { kind: 'start', observed: { id: exited.id } },
    ]);
    // A newer definition is tried.
    const newer = desired(containerSpec('svc', { image: 'img:3' }));
    expect(plan({ desired: [newer], observed: [running], facts, now: NOW }).steps).toMatchObject([
      { kind: 'replace', reason: 'spec changed' },
    ]);
  });

  it('tries a changed definition again only after the backoff of the replacement that failed', () => {
    const running = instance(oldD, 3);
    const facts = new Map([['svc', { ...NO_FACTS, changeRetryAt: NOW + 4_000 }]]);
    const p = plan({ desired: [newD], observed: [running], facts, now: NOW });
    expect(p.steps).toEqual([]);
    expect(p.waiting[0]?.reason).toMatch(/the last try failed, tried again after its backoff/);
    expect(p.wakeAt).toBe(NOW + 4_000);
    // The old one is still healed when it exits meanwhile.
    const exited = instance(oldD, 3, { state: 'exited', finishedAt: '2026-01-01T00:03:00Z' });
    expect(plan({ desired: [newD], observed: [exited], facts, now: NOW }).steps).toMatchObject([
      { kind: 'start', observed: { id: exited.id } },
    ]);
    expect(plan({ desired: [newD], observed: [running], facts, now: NOW + 4_000 }).steps).toMatchObject([
      { kind: 'replace', reason: 'spec changed' },
    ]);
  });
});
