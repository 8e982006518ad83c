import { describe, expect, it } from 'vitest';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { plan, stepContainer } from '../../agent/planner/plan.js';
import { NO_FACTS, type DesiredContainer, type RuntimeFacts } from '../../agent/planner/types.js';
import { containerSpec, GOLDEN_V1, MINIMAL, RICH } from '../support/spec.js';
import { desiredOf, observedOf } from '../support/planner.js';

const spec = containerSpec;

const desired = desiredOf;
const observed = observedOf;

const NOW = 1_000_000;
const facts = (entries: [string, Partial<RuntimeFacts>][]): Map<string, RuntimeFacts> =>
  new Map(entries.map(([k, v]) => [k, { ...NO_FACTS, ...v }]));

describe('planner', () => {
  it('creates missing containers, dependencies first, and waits for dependencies to run', () => {
    const a = desired(spec('a'));
    const b = desired(spec('b', { dependsOn: ['a'] }));
    const p1 = plan({ desired: [a, b], observed: [], facts: new Map(), now: NOW });
    expect(p1.steps.map((s) => [s.kind, s.kind === 'remove' ? '' : stepContainer(s)])).toEqual([
      ['create', 'a'],
    ]);
    expect(p1.waiting).toEqual([{ container: 'b', reason: 'waiting for a' }]);
    const p2 = plan({ desired: [a, b], observed: [observed(a)], facts: new Map(), now: NOW });
    expect(p2.steps.map((s) => s.kind)).toEqual(['create']);
  });

  it('leaves matching containers alone', () => {
    const a = desired(spec('a'));
    expect(plan({ desired: [a], observed: [observed(a)], facts: new Map(), now: NOW }).steps).toEqual([]);
  });

  it('does not recreate for reordered keys or equivalent units (same normalized spec)', () => {
    const one = spec('a', { memoryBytes: 64 * 1024 * 1024, environment: { A: '1', B: '2' } });
    const two = spec('a', { environment: { B: '2', A: '1' }, memoryBytes: 67108864 });
    const running = observed(desired(one));
    expect(plan({ desired: [desired(two)], observed: [running], facts: new Map(), now: NOW }).steps).toEqual(
      [],
    );
  });

  it('replaces a container whose spec or config changed, and names the reason', () => {
    const old = desired(spec('a'));
    const changed = desired(spec('a', { image: 'img:2' }));
    const p = plan({ desired: [changed], observed: [observed(old)], facts: new Map(), now: NOW });
    expect(p.steps).toMatchObject([{ kind: 'replace', reason: 'spec changed' }]);
    const cfg = desired(spec('a'), 'v1-new');
    const q = plan({
      desired: [cfg],
      observed: [observed(desired(spec('a'), 'v1-old'))],
      facts: new Map(),
      now: NOW,
    });
    expect(q.steps).toMatchObject([{ kind: 'replace', reason: 'config changed' }]);
  });

  describe('labels written by another spcd version (issue 13 item 5)', () => {
    const labelled = (d: DesiredContainer, specHash: string, over: Partial<ObservedContainer> = {}) => {
      const o = observed(d, over);
      return { ...o, identity: { ...o.identity, specHash } };
    };
    const run = (d: DesiredContainer, o: ObservedContainer) =>
      plan({ desired: [d], observed: [o], facts: new Map(), now: NOW });

    it('(a) current scheme: the same spec with a new optional field left unset needs no step', () => {
      const running = observed(desired(RICH));
      const upgraded = { ...RICH, readOnlyRootfs: undefined } as unknown as ContainerSpec;
      const p = run(desired(upgraded), running);
      expect(p.steps).toEqual([]);
      expect(p.untouched).toBeUndefined();
    });

    it('(b) a container of the previous scheme (v1) whose spec is unchanged is adopted as it is', () => {
      for (const [s, v1] of [
        [MINIMAL, GOLDEN_V1.minimal],
        [RICH, GOLDEN_V1.rich],
      ] as const) {
        const d = desired(s);
        expect(d.specHash).not.toBe(v1);
        const p = run(d, labelled(d, v1));
        expect(p.steps).toEqual([]);
        expect(p.waiting).toEqual([]);
        expect(p.untouched).toBeUndefined();
      }
    });

    it('(c) a container of the previous scheme (v1) whose definition was edited since is replaced', () => {
      const before = desired(RICH);
      for (const edited of [
        { ...RICH, image: 'registry.local/kolla/nova-libvirt:2024.2' },
        { ...RICH, environment: { ...RICH.environment, DEBUG: '1' } },
        { ...RICH, memoryBytes: undefined },
      ]) {
        const p = run(desired(edited), labelled(before, GOLDEN_V1.rich));
        expect(p.steps).toMatchObject([{ kind: 'replace', reason: 'spec changed' }]);
      }
      // A config edit on a v1-labelled container still applies too.
      const cfg = run(desired(RICH, 'v1-new'), labelled(desired(RICH, 'v1-old'), GOLDEN_V1.rich));
      expect(cfg.steps).toMatchObject([{ kind: 'replace', reason: 'config changed' }]);
    });

    it('(d) a hash scheme this spcd does not know (spcd downgraded): no step, and a reported reason', () => {
      const d = desired(spec('a', { image: 'img:2' }));
      const p = run(d, labelled(d, 'v9-abc'));
      expect(p.steps).toEqual([]);
      expect(p.untouched).toEqual([
        { container: 'a', reason: expect.stringContaining('spec hash scheme v9') },
      ]);
      expect(p.untouched?.[0]?.reason).toContain('labelled by a newer spcd');
      const cfg = run(desired(spec('a'), 'v1-x'), observed(desired(spec('a'), 'v7-y')));
      expect(cfg.steps).toEqual([]);
      expect(cfg.untouched).toEqual([
        { container: 'a', reason: expect.stringContaining('config hash scheme v7') },
      ]);
    });

    it('(d) such a container is still started when it exits (a start does not change it), never replaced', () => {
      const d = desired(spec('a', { image: 'img:2' }));
      const exited = labelled(d, 'v9-abc', {
        state: 'exited',
        exitCode: 1,
        finishedAt: '2026-01-01T00:00:01Z',
      });
      const p = run(d, exited);
      expect(p.steps).toMatchObject([{ kind: 'start' }]);
      expect(p.untouched).toHaveLength(1);
    });
  });

  it('removes only labelled containers whose definition was deleted', () => {
    const a = desired(spec('a'));
    const gone = desired(spec('gone'));
    const p = plan({ desired: [a], observed: [observed(a), observed(gone)], facts: new Map(), now: NOW });
    expect(p.steps).toMatchObject([
      { kind: 'remove', reason: 'definition deleted', observed: { name: 'gone' }, definitionDeleted: true },
    ]);
  });

  it('retries a refused removal only after its backoff', () => {
    const a = desired(spec('a'));
    const gone = desired(spec('gone'));
    const input = { desired: [a], observed: [observed(a), observed(gone)] };
    const facts = new Map<string, RuntimeFacts>([['gone', { ...NO_FACTS, nextAttemptAt: NOW + 4_000 }]]);
    const waiting = plan({ ...input, facts, now: NOW });
    expect(waiting.steps).toEqual([]);
    expect(waiting.waiting).toEqual([{ container: 'gone', reason: 'removal waits for its backoff' }]);
    expect(waiting.wakeAt).toBe(NOW + 4_000);
    const due = plan({ ...input, facts, now: NOW + 4_000 });
    expect(due.steps).toMatchObject([
      { kind: 'remove', observed: { name: 'gone' }, definitionDeleted: true },
    ]);
  });

  it('restarts an exited container once its backoff has passed, and reports the wait before', () => {
    const a = desired(spec('a'));
    const exited = observed(a, { state: 'exited', exitCode: 1, finishedAt: '2026-01-01T00:00:01Z' });
    const waiting = plan({
      desired: [a],
      observed: [exited],
      facts: facts([['a', { nextAttemptAt: NOW + 4000 }]]),
      now: NOW,
    });
    expect(waiting.steps).toEqual([]);
    expect(waiting.waiting).toEqual([{ container: 'a', reason: 'backoff' }]);
    expect(waiting.wakeAt).toBe(NOW + 4000);
    const due = plan({
      desired: [a],
      observed: [exited],
      facts: facts([['a', { nextAttemptAt: NOW }]]),
      now: NOW,
    });
    expect(due.steps).toMatchObject([{ kind: 'start', reason: 'exited with 1' }]);
  });

  it('keeps operator-stopped and failed containers as they are, and skips busy ones', () => {
    const a = desired(spec('a'));
    const stopped = observed(a, { state: 'exited', finishedAt: 'x' });
    expect(
      plan({ desired: [a], observed: [stopped], facts: facts([['a', { operatorStopped: true }]]), now: NOW })
        .steps,
    ).toEqual([]);
    expect(
      plan({ desired: [a], observed: [stopped], facts: facts([['a', { failed: true }]]), now: NOW }).steps,
    ).toEqual([]);
    const changed = desired(spec('a', { image: 'img:9' }));
    expect(
      plan({ desired: [changed], observed: [observed(a)], facts: facts([['a', { busy: true }]]), now: NOW })
        .steps,
    ).toEqual([]);
  });

  it('removes a stray instance beside the one under the stable name', () => {
    const a = desired(spec('a'));
    const primary = observed(a, {}, 3);
    const stray = observed(a, { name: 'a.g2.old', state: 'exited' }, 2);
    const p = plan({ desired: [a], observed: [primary, stray], facts: new Map(), now: NOW });
    expect(p.steps).toMatchObject([
      { kind: 'remove', observed: { name: 'a.g2.old' }, definitionDeleted: false },
    ]);
  });
});
