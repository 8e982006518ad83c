import { specHash } from '../../agent/model/hash.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import type { RecoveryReport } from '../../agent/executor/recover.js';
import type { JournalEntry, UpgradeStep } from '../../agent/state/journal.js';
import { FakeProcess, INSTANCE } from './fake-executor.js';
import { NEXT, OLD } from './upgrade-fixture.js';

/**
 * A process killed in the middle of a journaled step, for the recovery unit
 * tests: the engine, state.json and the journal as it leaves them.
 */

/** What the engine and the journal hold when the process dies. */
export interface Left {
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
  /** The entry is an operator's change: what its commit does to the pin. */
  readonly pin?: JournalEntry['pin'];
}

/**
 * Leaves the engine, state and journal as a process killed in `left.step`
 * would; returns the next process. `born` gets the dead one (the caller closes
 * it: it owns the directory). The container moves from `specs.old` to
 * `specs.next`, both named svc (OLD to NEXT unless told).
 */
export async function killedIn(
  left: Left,
  born: (p: FakeProcess) => void,
  specs: { old: ContainerSpec; next: ContainerSpec } = { old: OLD, next: NEXT },
): Promise<FakeProcess> {
  const p = await FakeProcess.create();
  born(p);
  const { engine, state, journal } = p.deps;
  const old: ObservedContainer | undefined = left.old === 'none' ? undefined : await p.first(specs.old);
  const spec = old ? specs.next : specs.old;
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
    ...(left.pin !== undefined ? { pin: left.pin } : {}),
  };
  await journal.write(entry);
  p.engine.processKilled();
  return p.restart();
}

/** Generation 2 started and running, the old one stopped and parked, as a kill in `step` leaves them. */
export const startedIn = (step: UpgradeStep): Left => ({
  step,
  old: 'parked',
  oldRunning: false,
  fresh: 'named',
  freshRunning: true,
  newIdJournaled: true,
});

/** The one road a report of one entry took ('nothing' when it holds none). */
export function roadOf(
  report: RecoveryReport,
): 'undone' | 'rolledForward' | 'finished' | 'quarantined' | 'nothing' {
  for (const road of ['undone', 'rolledForward', 'finished', 'quarantined'] as const)
    if (report[road].length) return road;
  return 'nothing';
}
