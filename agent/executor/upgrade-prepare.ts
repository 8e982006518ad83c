import { SpcdError, toSpcdError } from '../errors.js';
import { isRunning } from '../model/observed.js';
import { checkVmSafety } from './guard.js';
import { resolveImage, type ResolvedImage } from './image.js';
import { runBootstrap } from './bootstrap.js';
import { ensureVolumes } from './volumes.js';
import { parkedName, stagingName, type Prepared, type Txn } from './upgrade-txn.js';

/**
 * Everything before the journal's first step: pull (outside the window), the
 * VM-safety guard, volumes, allocate N+1 and its mounts, bootstrap tasks.
 * Nothing running is touched; a failure after the allocation abandons N.
 */
export async function prepare(tx: Txn): Promise<Prepared> {
  const { deps, req, name, old } = tx;
  // 0. An unresolved entry (a rollback that could not finish: quarantined) is never overwritten.
  await refuseWhileJournaled(tx);
  // 1. Pull, outside the window. Nothing has changed yet if it fails.
  const { image, pullMs } = await pull(tx);
  // 2. The VM-safety guard, before anything is stopped.
  const warnings =
    old && isRunning(old) ? await checkVmSafety(deps, req.spec, old, image.labels, req.force === true) : [];

  // 3. Its named volumes, then allocate N+1 (persisted before anything uses the number) and prepare its mounts.
  await ensureVolumes(deps, req.spec);
  const extras = await deps.preparer.prepare(req.spec, deps.state.record(name)?.nextGeneration ?? 1);
  const gen = await deps.state.allocate(
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
    new Date(deps.clock.now()),
  );
  const N = gen.generation;
  deps.failpoint('upgrade.after-allocate');

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
    fromGeneration: tx.oldGen,
    toGeneration: N,
    oldId: old?.id ?? null,
    stagingName: stagingName(name, N),
    parkedName: old ? parkedName(name, old.identity.generation) : '',
    startedAt: new Date(deps.clock.now()).toISOString(),
    ...(req.pin !== undefined ? { pin: req.pin } : {}),
  };
  // Bootstrap tasks (db sync...) run before anything is stopped; a failure touches nothing running.
  try {
    await runBootstrap(deps, req.spec, identity, extras, req.operationId);
  } catch (err) {
    await abandon(tx, N, err);
    throw err;
  }
  return { image, pullMs, warnings, extras, generation: N, identity, entryBase };
}

/** Resolves the image and checks its pinned digest. */
async function pull(tx: Txn): Promise<{ image: ResolvedImage; pullMs: number }> {
  const { deps, req } = tx;
  const pullStart = deps.clock.now();
  tx.step('pull', tx.oldGen ?? 0, 'begin', req.spec.image);
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
  const pullMs = deps.clock.now() - pullStart;
  tx.step('pull', tx.oldGen ?? 0, 'done', image.digest ?? image.id);
  deps.failpoint('upgrade.after-pull');
  return { image, pullMs };
}

/**
 * Generation N failed before the old instance was touched (bootstrap or
 * create): N is marked failed and the config points back at what the old runs.
 */
export async function abandon(tx: Txn, generation: number, err: unknown): Promise<void> {
  await tx.deps.state.setOutcome(tx.name, generation, 'failed', toSpcdError(err).message);
  await restoreOldConfig(tx);
}

/** Points the config back at what the old instance runs (bootstrap or create failed after prepare switched it). */
async function restoreOldConfig(tx: Txn): Promise<void> {
  const { deps, name, old } = tx;
  if (!old) return;
  const restored = await deps.preparer.restore(name, old.identity.configHash).catch(() => false);
  if (!restored)
    deps.log.warn(
      { container: name, configHash: old.identity.configHash },
      'could not restore the previous config',
    );
}

/** RECOVERY_QUARANTINED when the container still has a journal entry (or an unreadable one). */
async function refuseWhileJournaled(tx: Txn): Promise<void> {
  const { deps, name } = tx;
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
