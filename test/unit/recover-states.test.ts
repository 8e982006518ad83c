import { writeFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { recoverJournal, retryQuarantined } from '../../agent/executor/recover.js';
import type { FakeProcess } from '../support/fake-executor.js';
import { killedIn as killedInto, roadOf, startedIn, type Left } from '../support/recovery-fixture.js';
import { engineView } from '../support/upgrade-fixture.js';

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
const killedIn = (left: Left): Promise<FakeProcess> => killedInto(left, (p) => (proc = p));

interface Want {
  readonly report: 'undone' | 'rolledForward' | 'finished' | 'quarantined';
  /** Every container of the instance afterwards, as name:state:gN. */
  readonly engine: string[];
  /** The new generation's outcome in state.json. */
  readonly outcome: string;
  /** The reason a quarantine gives (the entry stays for the operator). */
  readonly reason?: RegExp;
}

const UNDONE: Want = { report: 'undone', engine: ['svc:running:g1'], outcome: 'rolled-back' };
const ROLLED_FORWARD: Want = { report: 'rolledForward', engine: ['svc:running:g2'], outcome: 'current' };

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
    name: 'starting-new, the new one started and running (its gate passes again)',
    left: startedIn('starting-new'),
    want: ROLLED_FORWARD,
  },
  {
    name: 'gating, the new one running (its gate passes again)',
    left: startedIn('gating'),
    want: ROLLED_FORWARD,
  },
  {
    name: 'gating, the new one running but the old one never stopped',
    left: { step: 'gating', old: 'parked', fresh: 'named', freshRunning: true, newIdJournaled: true },
    want: UNDONE,
  },
  {
    name: 'gating, the old instance vanished and the new one runs: rolled forward, not quarantined',
    left: { step: 'gating', old: 'gone', fresh: 'named', freshRunning: true, newIdJournaled: true },
    want: ROLLED_FORWARD,
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
    name: 'a first create, gating, running: rolled forward',
    left: { step: 'gating', old: 'none', fresh: 'named', freshRunning: true, newIdJournaled: true },
    want: { report: 'rolledForward', engine: ['svc:running:g1'], outcome: 'current' },
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
      expect(roadOf(report)).toBe(want.report);
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
      if (want.report !== 'undone' && left.old !== 'none') {
        expect(next.deps.state.generation('svc', 1)?.outcome).toBe('superseded');
        expect(next.deps.state.record('svc')?.lastKnownGood).toBe(2);
      }
    });
  }
});

describe('journal recovery with a malformed entry', () => {
  it('quarantines the bad file by name, recovers the others, and clears it once the operator removed it', async () => {
    const next = await killedIn(startedIn('gating'));
    const bad = next.deps.journal.fileOf('db');
    await writeFile(bad, '{"container": "db", "step": "gat');
    const report = await recoverJournal(next.deps);
    expect(report.rolledForward).toEqual(['svc']);
    expect(report.quarantined).toEqual([
      {
        container: 'db',
        file: bad,
        reason: expect.stringMatching(/^malformed journal entry: .*not valid JSON/),
        entry: undefined,
      },
    ]);
    expect(report.quarantined[0]?.reason).toContain(bad);
    expect(engineView(next)).toEqual(['svc:running:g2']);
    // A reload retries it: still malformed, then gone.
    expect(await retryQuarantined(next.deps, 'db')).toMatchObject({ container: 'db', file: bad });
    await next.deps.journal.clear('db');
    expect(await retryQuarantined(next.deps, 'db')).toBe('cleared');
  });
});
