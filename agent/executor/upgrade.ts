import { SpcdError, toSpcdError } from '../errors.js';
import { upgradeOutcomeOf, type UpgradeOutcome } from '../model/events.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import type { JournalEntry, UpgradeStep } from '../state/journal.js';
import { checkVmSafety } from './guard.js';
import type { ExecutorDeps } from './ports.js';
import { resolveImage, type PullPolicy } from './image.js';
import { runBootstrap } from './bootstrap.js';
import { ensureVolumes } from './volumes.js';
import { finish, stopGraceOf, undo } from './undo.js';
import { censusAfter, censusBefore } from './census.js';
import { gate, rewatchOld } from './gate.js';
import { settleAll, stopOld, type OldStopped } from './stop-old.js';

export interface UpgradeRequest {
  readonly operationId: string;
  readonly kind: 'upgrade' | 'recreate' | 'rollback';
  /** The spec the new generation runs. */
  readonly spec: ContainerSpec;
  readonly specHash: string;
  /** The instance it replaces; undefined when there is none. */
  readonly current: ObservedContainer | undefined;
  readonly pull: PullPolicy;
  readonly expectDigest?: string;
  /** For a rollback: the generation whose spec this re-applies. */
  readonly from?: number;
  readonly force?: boolean;
  readonly reason: string;
  readonly signal?: AbortSignal;
}

export interface UpgradeWindow {
  /** From the stop call on the old container to the new one running. */
  readonly stopToRunningMs: number;
  /** From the stop call to the new generation passing its health gate. */
  readonly stopToHealthyMs: number;
}

export interface UpgradeResult {
  readonly container: string;
  readonly generation: number;
  readonly previousGeneration: number | null;
  readonly image: string;
  readonly imageDigest: string | null;
  readonly containerId: string;
  readonly pullMs: number;
  readonly window: UpgradeWindow | null;
  readonly warnings: readonly string[];
}

const stagingName = (name: string, gen: number): string => `${name}.g${gen}.new`;
const parkedName = (name: string, gen: number): string => `${name}.g${gen}.old`;

/**
 * The upgrade transaction for one container: pull (outside the window),
 * allocate generation N+1, create it stopped under a staging name, swap the
 * names, stop the old, start the new, pass the health gate, commit. Any
 * failure after the old one was touched rolls back to it; no registry is
 * needed for that because the old container and image are kept until commit.
 * Each step is journaled before it begins, so a crash is finished or undone
 * on restart (recover.ts).
 */
export async function upgradeContainer(deps: ExecutorDeps, req: UpgradeRequest): Promise<UpgradeResult> {
  // Its end goes out on the bus once, whatever the exit: the upgrades metric counts these.
  const ended = (outcome: UpgradeOutcome, code?: string): void =>
    deps.events.publish({
      type: 'upgrade',
      at: deps.clock.now(),
      operationId: req.operationId,
      container: req.spec.name,
      kind: req.kind,
      outcome,
      ...(code !== undefined ? { code } : {}),
    });
  try {
    const result = await transaction(deps, req);
    ended('succeeded');
    return result;
  } catch (err) {
    const code = toSpcdError(err).code;
    ended(upgradeOutcomeOf(code), code);
    throw err;
  }
}

async function transaction(deps: ExecutorDeps, req: UpgradeRequest): Promise<UpgradeResult> {
  const { engine, state, journal, events, clock, failpoint, log } = deps;
  const name = req.spec.name;
  const step = (
    s: string,
    generation: number,
    outcome: 'begin' | 'done' | 'failed',
    detail?: string,
  ): void => {
    events.publish({
      type: 'upgrade-step',
      at: clock.now(),
      operationId: req.operationId,
      container: name,
      step: s,
      generation,
      outcome,
      ...(detail !== undefined ? { detail } : {}),
    });
  };
  const old = req.current;
  const oldGen = old?.identity.generation ?? null;

  // 0. An unresolved entry (a rollback that could not finish: quarantined) is never overwritten.
  await refuseWhileJournaled(deps, name);

  // 1. Pull, outside the window. Nothing has changed yet if it fails.
  const pullStart = clock.now();
  step('pull', oldGen ?? 0, 'begin', req.spec.image);
  const image = await resolveImage(deps, req.spec.image, req.pull, req.operationId, req.signal);
  // The pin may be given bare (sha256:…) or as repo@sha256:…; the content digest decides.
  const digestOf = (d: string | null | undefined): string | undefined => d?.slice(d.indexOf('@') + 1);
  if (req.expectDigest && digestOf(image.digest) !== digestOf(req.expectDigest)) {
    throw new SpcdError(
      'IMAGE_DIGEST_MISMATCH',
      `${req.spec.image} has digest ${image.digest ?? 'none'}, expected ${req.expectDigest}`,
      {
        image: req.spec.image,
        digest: image.digest,
        expected: req.expectDigest,
      },
    );
  }
  const pullMs = clock.now() - pullStart;
  step('pull', oldGen ?? 0, 'done', image.digest ?? image.id);
  failpoint('upgrade.after-pull');

  // 2. The VM-safety guard, before anything is stopped.
  const warnings =
    old && isRunning(old) ? await checkVmSafety(deps, req.spec, old, image.labels, req.force === true) : [];

  // 3. Its named volumes, then allocate N+1 (persisted before anything uses the number) and prepare its mounts.
  await ensureVolumes(deps, req.spec);
  const extras = await deps.preparer.prepare(req.spec, state.record(name)?.nextGeneration ?? 1);
  const gen = await state.allocate(
    name,
    {
      image: req.spec.image,
      imageDigest: image.digest,
      specHash: req.specHash,
      configHash: extras.configHash,
      ...(extras.configFiles ? { configFiles: extras.configFiles } : {}),
      spec: req.spec,
      ...(req.from !== undefined ? { from: req.from } : {}),
    },
    new Date(clock.now()),
  );
  const N = gen.generation;
  failpoint('upgrade.after-allocate');

  const identity = {
    instance: deps.instance,
    set: req.spec.set,
    container: name,
    generation: N,
    specHash: req.specHash,
    configHash: extras.configHash,
  };
  const entryBase = {
    operationId: req.operationId,
    kind: req.kind,
    container: name,
    fromGeneration: oldGen,
    toGeneration: N,
    oldId: old?.id ?? null,
    stagingName: stagingName(name, N),
    parkedName: old ? parkedName(name, old.identity.generation) : '',
    startedAt: new Date(clock.now()).toISOString(),
  };
  // Bootstrap tasks (db sync...) run before anything is stopped; a failure touches nothing running.
  try {
    await runBootstrap(deps, req.spec, identity, extras, req.operationId);
  } catch (err) {
    await state.setOutcome(name, N, 'failed', toSpcdError(err).message);
    await restoreOldConfig(deps, name, old);
    throw err;
  }
  let entry: JournalEntry = { ...entryBase, newId: null, step: 'creating' };
  const begin = async (s: UpgradeStep, newId: string | null): Promise<void> => {
    entry = { ...entryBase, newId, step: s };
    await journal.write(entry);
  };

  // 4. Create the new generation, stopped, under a staging name.
  await begin('creating', null);
  step('create', N, 'begin');
  let newId: string;
  try {
    newId = await engine.create({
      spec: req.spec,
      identity,
      name: old ? stagingName(name, N) : name,
      extraBinds: extras.extraBinds,
      extraEnv: extras.extraEnv,
    });
  } catch (err) {
    await state.setOutcome(name, N, 'failed', toSpcdError(err).message);
    await restoreOldConfig(deps, name, old);
    await journal.clear(name);
    step('create', N, 'failed', toSpcdError(err).message);
    throw err;
  }
  step('create', N, 'done', newId.slice(0, 12));
  failpoint('upgrade.after-create');

  // The domain census: what the running hypervisor lists, before anything is stopped (census.ts).
  const oldCensus = old && state.generation(name, old.identity.generation)?.spec.census;
  const census =
    old && isRunning(old) ? await censusBefore(deps, oldCensus || req.spec.census, old.id) : undefined;
  deps.health.pause(name);
  let stopAt = 0;
  let runningAt = 0;
  let oldStopped: OldStopped | undefined;
  try {
    if (old) {
      // 5. Swap names while the old one still runs: the window is only stop + start.
      await begin('renaming', newId);
      await engine.rename(old.id, parkedName(name, old.identity.generation));
      await engine.rename(newId, name);
      failpoint('upgrade.after-rename');

      await begin('stopping-old', newId);
      step('stop-old', N, 'begin', old.id.slice(0, 12));
      stopAt = clock.now();
      const oldSpec = state.generation(name, old.identity.generation)?.spec;
      oldStopped = await stopOld(
        deps,
        old,
        stopGraceOf(deps, name, old.identity.generation, req.spec.stopGraceMs),
        oldSpec?.network === 'host',
      );
      step('stop-old', N, 'done', oldStopped.early ? 'no process left' : undefined);
      failpoint('upgrade.after-stop-old');
    }

    // Inside the window: the journal's step and the start go together (recovery undoes
    // 'stopping-old' and 'starting-new' alike), both settled before anything goes on.
    step('start-new', N, 'begin');
    if (!stopAt) stopAt = clock.now();
    await settleAll([begin('starting-new', newId), engine.start(newId)]);
    runningAt = clock.now();
    step('start-new', N, 'done');
    failpoint('upgrade.after-start-new');
    // A successor started early still needs the engine to finish the old one's stop.
    await oldStopped?.engineStop;

    await begin('gating', newId);
    step('health-gate', N, 'begin');
    deps.health.resume(name);
    await gate(deps, name, newId, req.spec, req.signal);
    step('health-gate', N, 'done');
    failpoint('upgrade.after-gate');
  } catch (err) {
    const e = toSpcdError(err);
    // Nothing is undone while the engine still stops the old instance.
    await oldStopped?.engineStop.catch(() => undefined);
    step('rollback', N, 'begin', e.message);
    log.warn(
      { container: name, generation: N, err: e.message, code: e.code },
      'upgrade failed; rolling back',
    );
    try {
      await undo(deps, entry, `rolled back: ${e.message}`);
    } catch (rbErr) {
      const rb = toSpcdError(rbErr);
      step('rollback', N, 'failed', rb.message);
      throw new SpcdError(
        'ROLLBACK_FAILED',
        `upgrade of ${name} failed (${e.message}) and so did its rollback (${rb.message})`,
        {
          container: name,
          generation: N,
          cause: e.toJSON(),
          rollback: rb.toJSON(),
        },
      );
    }
    step('rollback', N, 'done');
    // The target failed on its own merits: the reconciler does not retry it until the definition changes.
    await state.setFailedTarget(name, {
      specHash: req.specHash,
      configHash: extras.configHash,
      generation: N,
    });
    if (old) await rewatchOld(deps, name, old, req.spec).catch(() => deps.health.unwatch(name));
    throw new SpcdError(
      e.code === 'HEALTH_GATE_FAILED' ? 'HEALTH_GATE_FAILED' : 'UPGRADE_FAILED',
      `upgrade of ${name} to generation ${N} failed and was rolled back to ${oldGen ?? 'nothing'}: ${e.message}`,
      { container: name, generation: N, rolledBackTo: oldGen, cause: e.toJSON() },
    );
  } finally {
    deps.health.resume(name);
  }
  const healthyAt = clock.now();

  // 6. Commit: N is last known good; only now does the old instance go.
  await begin('committing', newId);
  await finish(deps, entry);
  failpoint('upgrade.after-commit');
  step('commit', N, 'done');
  const ctx = { operationId: req.operationId, container: name, action: req.kind, containerId: newId };
  await censusAfter(deps, census, req.spec.census, ctx);
  return {
    container: name,
    generation: N,
    previousGeneration: oldGen,
    image: req.spec.image,
    imageDigest: image.digest,
    containerId: newId,
    pullMs,
    window: old ? { stopToRunningMs: runningAt - stopAt, stopToHealthyMs: healthyAt - stopAt } : null,
    warnings,
  };
}

/** Points the config back at what the old instance runs (bootstrap or create failed after prepare switched it). */
async function restoreOldConfig(
  deps: ExecutorDeps,
  name: string,
  old: ObservedContainer | undefined,
): Promise<void> {
  if (!old) return;
  const restored = await deps.preparer.restore(name, old.identity.configHash).catch(() => false);
  if (!restored)
    deps.log.warn(
      { container: name, configHash: old.identity.configHash },
      'could not restore the previous config',
    );
}

/** RECOVERY_QUARANTINED when the container still has a journal entry (or an unreadable one). */
async function refuseWhileJournaled(deps: ExecutorDeps, name: string): Promise<void> {
  let pending: string | undefined;
  try {
    const e = await deps.journal.read(name);
    if (e) pending = `step ${e.step} of operation ${e.operationId}`;
  } catch (err) {
    pending = toSpcdError(err).message;
  }
  if (pending === undefined) return;
  const file = deps.journal.fileOf(name);
  throw new SpcdError(
    'RECOVERY_QUARANTINED',
    `${name} has an unresolved journal entry (${pending}) in ${file}; clear the quarantine first (docs/how-to/recover-from-a-failed-upgrade.md)`,
    { container: name, file },
  );
}
