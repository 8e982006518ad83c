import { writeFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { recoverJournal, retryQuarantined } from '../../agent/executor/recover.js';
import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { JournalEntry, UpgradeStep } from '../../agent/state/journal.js';
import { FakeProcess, INSTANCE } from '../support/fake-executor.js';
import { engineView, NEXT, OLD } from '../support/upgrade-fixture.js';

/**
 * Journal recovery from each journaled step, with the engine as a kill in the
 * middle of that step leaves it (test/unit/upgrade-steps.test.ts kills at the
 * failpoints, between steps). The journal and state are real files; the
 * engine is the fake one, shared by the dead process and the next. No Docker.
 */
let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

/** What the engine and the journal hold when the process dies. */
interface Left {
  readonly step: UpgradeStep;
  /** The old instance: under its name, parked (renamed aside), removed, or there never was one (a first create). */
  readonly old: 'named' | 'parked' | 'gone' | 'none';
  readonly oldRunning?: boolean;
  /** The new generation's instance. */
  readonly fresh: 'absent' | 'staging' | 'named' | 'gone';
  readonly freshRunning?: boolean;
  /** The entry names the new instance's id (false: killed inside create, before it was journaled). */
  readonly newIdJournaled: boolean;
  /** The state already records the new generation as current (committing: killed after state.commit). */
  readonly committed?: boolean;
}

interface Want {
  readonly report: 'undone' | 'finished' | 'quarantined';
  /** Every container of the instance afterwards, as name:state:gN. */
  readonly engine: string[];
  /** The new generation's outcome in state.json. */
  readonly outcome: string;
  /** The reason a quarantine gives (the entry stays for the operator). */
  readonly reason?: RegExp;
}

/** Leaves the engine, state and journal as a process killed in `left.step` would; returns the next process. */
async function killedIn(left: Left): Promise<FakeProcess> {
  const p = await FakeProcess.create();
  proc = p;
  const { engine, state, journal } = p.deps;
  const old: ObservedContainer | undefined = left.old === 'none' ? undefined : await p.first(OLD);
  const spec = old ? NEXT : OLD;
  p.engine.addImage(spec.image);
  const gen = await state.allocate(
    'svc',
    { image: spec.image, imageDigest: null, specHash: specHash(spec), configHash: 'none', spec },
    new Date(p.clock.now()),
  );
  const N = gen.generation;
  const stagingName = `svc.g${N}.new`;
  const parkedName = old ? `svc.g${old.identity.generation}.old` : '';
  if (old && left.old !== 'named') await engine.rename(old.id, parkedName);
  let newId: string | null = null;
  if (left.fresh !== 'absent') {
    newId = await engine.create({
      spec,
      identity: {
        instance: INSTANCE,
        set: spec.set,
        container: 'svc',
        generation: N,
        specHash: specHash(spec),
        configHash: 'none',
      },
      name: left.fresh === 'staging' ? stagingName : 'svc',
      extraBinds: [],
      extraEnv: {},
    });
    if (left.freshRunning) await engine.start(newId);
  }
  if (old && left.oldRunning === false) await engine.stop(old.id, 0);
  if (old && left.old === 'gone') await engine.remove(old.id);
  if (newId && left.fresh === 'gone') await engine.remove(newId);
  if (left.committed) await state.commit('svc', N);
  const entry: JournalEntry = {
    operationId: 'op-up',
    kind: old ? 'upgrade' : 'create',
    container: 'svc',
    fromGeneration: old?.identity.generation ?? null,
    toGeneration: N,
    oldId: old?.id ?? null,
    newId: left.newIdJournaled ? newId : null,
    stagingName,
    parkedName,
    step: left.step,
    startedAt: new Date(p.clock.now()).toISOString(),
  };
  await journal.write(entry);
  p.engine.processKilled();
  return p.restart();
}

const UNDONE: Want = { report: 'undone', engine: ['svc:running:g1'], outcome: 'rolled-back' };

const CASES: { name: string; left: Left; want: Want }[] = [
  {
    name: 'creating, before the engine created anything',
    left: { step: 'creating', old: 'named', fresh: 'absent', newIdJournaled: false },
    want: UNDONE,
  },
  {
    name: 'creating, created under the staging name but its id not journaled (found by its labels)',
    left: { step: 'creating', old: 'named', fresh: 'staging', newIdJournaled: false },
    want: UNDONE,
  },
  {
    name: 'renaming, before the first rename',
    left: { step: 'renaming', old: 'named', fresh: 'staging', newIdJournaled: true },
    want: UNDONE,
  },
  {
    name: 'renaming, between the two renames (old parked, new still staging)',
    left: { step: 'renaming', old: 'parked', fresh: 'staging', newIdJournaled: true },
    want: UNDONE,
  },
  {
    name: 'stopping-old, the stop not yet effective',
    left: { step: 'stopping-old', old: 'parked', fresh: 'named', newIdJournaled: true },
    want: UNDONE,
  },
  {
    name: 'stopping-old, old stopped and the new started before starting-new was written',
    left: {
      step: 'stopping-old',
      old: 'parked',
      oldRunning: false,
      fresh: 'named',
      freshRunning: true,
      newIdJournaled: true,
    },
    want: UNDONE,
  },
  {
    name: 'starting-new, the start not yet made',
    left: { step: 'starting-new', old: 'parked', oldRunning: false, fresh: 'named', newIdJournaled: true },
    want: UNDONE,
  },
  {
    name: 'gating, the new one running',
    left: {
      step: 'gating',
      old: 'parked',
      oldRunning: false,
      fresh: 'named',
      freshRunning: true,
      newIdJournaled: true,
    },
    want: UNDONE,
  },
  {
    name: 'committing, before the state commit',
    left: {
      step: 'committing',
      old: 'parked',
      oldRunning: false,
      fresh: 'named',
      freshRunning: true,
      newIdJournaled: true,
    },
    want: { report: 'finished', engine: ['svc:running:g2'], outcome: 'current' },
  },
  {
    name: 'committing, committed and the old one removed already (finishing again is harmless)',
    left: {
      step: 'committing',
      old: 'gone',
      fresh: 'named',
      freshRunning: true,
      newIdJournaled: true,
      committed: true,
    },
    want: { report: 'finished', engine: ['svc:running:g2'], outcome: 'current' },
  },
  {
    name: 'committing, but the new instance is gone: the old one is kept, untouched',
    left: { step: 'committing', old: 'parked', oldRunning: false, fresh: 'gone', newIdJournaled: true },
    want: {
      report: 'quarantined',
      engine: ['svc.g1.old:exited:g1'],
      outcome: 'in-progress',
      reason: /ROLLBACK_FAILED: generation 2 of svc passed its gate but its instance is gone/,
    },
  },
  {
    name: 'renaming, the old instance vanished: the new one is kept, named and started',
    left: { step: 'renaming', old: 'gone', fresh: 'staging', newIdJournaled: true },
    want: {
      report: 'quarantined',
      engine: ['svc:running:g2'],
      outcome: 'in-progress',
      reason:
        /ROLLBACK_FAILED: the previous instance of svc .* is gone; kept generation 2 .* running under svc/,
    },
  },
  {
    name: 'starting-new, with both instances gone',
    left: { step: 'starting-new', old: 'gone', fresh: 'gone', newIdJournaled: true },
    want: {
      report: 'quarantined',
      engine: [],
      outcome: 'in-progress',
      reason: /ROLLBACK_FAILED: the previous instance of svc .* is gone; the new generation is gone too/,
    },
  },
  {
    name: 'a first create, starting-new: the new instance is removed, nothing runs',
    left: { step: 'starting-new', old: 'none', fresh: 'named', newIdJournaled: true },
    want: { report: 'undone', engine: [], outcome: 'rolled-back' },
  },
  {
    name: 'a first create, committing: finished',
    left: { step: 'committing', old: 'none', fresh: 'named', freshRunning: true, newIdJournaled: true },
    want: { report: 'finished', engine: ['svc:running:g1'], outcome: 'current' },
  },
];

describe('journal recovery from each journaled step, killed mid-step', () => {
  for (const { name, left, want } of CASES) {
    it(`${name}: ${want.report}`, async () => {
      const next = await killedIn(left);
      const N = left.old === 'none' ? 1 : 2;
      const report = await recoverJournal(next.deps);
      const got = report.undone.length ? 'undone' : report.finished.length ? 'finished' : 'quarantined';
      expect(got).toBe(want.report);
      expect(engineView(next)).toEqual(want.engine);
      expect(next.deps.state.generation('svc', N)?.outcome).toBe(want.outcome);
      const entries = (await next.deps.journal.scan()).entries;
      if (want.report === 'quarantined') {
        expect(report.quarantined).toEqual([
          expect.objectContaining({ container: 'svc', file: next.deps.journal.fileOf('svc') }),
        ]);
        expect(report.quarantined[0]?.reason).toMatch(want.reason!);
        expect(entries.map((e) => e.step)).toEqual([left.step]);
        return;
      }
      expect(report.quarantined).toEqual([]);
      expect(entries).toEqual([]);
      if (want.report === 'undone' && left.old !== 'none') {
        // The old generation's config is put back before it starts again; it stays current.
        expect(next.preparer.restored).toEqual(['svc:none']);
        expect(next.deps.state.generation('svc', 1)?.outcome).toBe('current');
      }
      if (want.report === 'finished' && left.old !== 'none') {
        expect(next.deps.state.generation('svc', 1)?.outcome).toBe('superseded');
        expect(next.deps.state.record('svc')?.lastKnownGood).toBe(2);
      }
    });
  }
});

describe('journal recovery with a malformed entry', () => {
  it('quarantines the bad file by name, recovers the others, and clears it once the operator removed it', async () => {
    const next = await killedIn({
      step: 'gating',
      old: 'parked',
      oldRunning: false,
      fresh: 'named',
      freshRunning: true,
      newIdJournaled: true,
    });
    const bad = next.deps.journal.fileOf('db');
    await writeFile(bad, '{"container": "db", "step": "gat');
    const report = await recoverJournal(next.deps);
    expect(report.undone).toEqual(['svc']);
    expect(report.quarantined).toEqual([
      {
        container: 'db',
        file: bad,
        reason: expect.stringMatching(/^malformed journal entry: .*not valid JSON/),
        entry: undefined,
      },
    ]);
    expect(report.quarantined[0]?.reason).toContain(bad);
    expect(engineView(next)).toEqual(['svc:running:g1']);
    // A reload retries it: still malformed, then gone.
    expect(await retryQuarantined(next.deps, 'db')).toMatchObject({ container: 'db', file: bad });
    await next.deps.journal.clear('db');
    expect(await retryQuarantined(next.deps, 'db')).toBe('cleared');
  });
});
