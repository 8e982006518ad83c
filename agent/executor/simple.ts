import { SpcdError } from '../errors.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import type { DesiredContainer } from '../planner/types.js';
import type { ExecutorDeps } from './ports.js';
import { resolveImage } from './image.js';
import { runBootstrap } from './bootstrap.js';
import { vmSafetyRefused } from './guard.js';
import { stopGraceOf } from './undo.js';
import { ensureVolumes } from './volumes.js';

/** First creation of a container: allocate a generation, create under its name, start. */
export async function createContainer(
  deps: ExecutorDeps,
  d: DesiredContainer,
  operationId: string,
): Promise<string> {
  const { engine, state, events, clock } = deps;
  const spec = d.spec;
  const image = await resolveImage(deps, spec.image, 'missing', operationId);
  await ensureVolumes(deps, spec);
  const extras = await deps.preparer.prepare(spec, state.record(spec.name)?.nextGeneration ?? 1);
  const gen = await state.allocate(
    spec.name,
    {
      image: spec.image,
      imageDigest: image.digest,
      specHash: d.specHash,
      configHash: extras.configHash,
      ...(extras.configFiles ? { configFiles: extras.configFiles } : {}),
      spec,
    },
    new Date(clock.now()),
  );
  const identity = {
    instance: deps.instance,
    set: spec.set,
    container: spec.name,
    generation: gen.generation,
    specHash: d.specHash,
    configHash: extras.configHash,
  };
  try {
    await runBootstrap(deps, spec, identity, extras, operationId);
  } catch (err) {
    await state.setOutcome(spec.name, gen.generation, 'failed', (err as Error).message);
    throw err;
  }
  let id: string;
  try {
    id = await engine.create({
      spec,
      identity,
      extraBinds: extras.extraBinds,
      extraEnv: extras.extraEnv,
    });
  } catch (err) {
    await state.setOutcome(spec.name, gen.generation, 'failed', (err as Error).message);
    if (err instanceof SpcdError && err.code === 'ENGINE_CONFLICT') {
      throw new SpcdError(
        'ENGINE_CONFLICT',
        `cannot create ${spec.name}: the name is taken by a container spcd does not manage (left alone)`,
        { container: spec.name },
        { cause: err },
      );
    }
    throw err;
  }
  await engine.start(id);
  await state.commit(spec.name, gen.generation);
  events.publish({
    type: 'state',
    at: clock.now(),
    container: spec.name,
    from: 'missing',
    to: 'running',
    reason: 'created',
  });
  deps.log.info(
    { container: spec.name, generation: gen.generation, id: id.slice(0, 12) },
    'container created and started',
  );
  return id;
}

export async function startContainer(
  deps: ExecutorDeps,
  o: ObservedContainer,
  reason: string,
): Promise<void> {
  const started = deps.clock.now();
  await deps.engine.start(o.id);
  deps.events.publish({
    type: 'state',
    at: deps.clock.now(),
    container: o.identity.container,
    from: o.state,
    to: 'running',
    reason,
  });
  deps.log.info(
    { container: o.identity.container, reason, ms: deps.clock.now() - started },
    'container started',
  );
}

/**
 * Stops and removes a container that carries our labels and has no definition
 * any more (or is a stray beside its defined primary). With `keepHypervisor`,
 * a running hypervisor (role in its generation's recorded definition) is
 * refused while VMs run: their hypervisor would be gone.
 */
export async function removeContainer(
  deps: ExecutorDeps,
  o: ObservedContainer,
  reason: string,
  keepHypervisor: boolean,
): Promise<void> {
  if (keepHypervisor && isRunning(o)) await refuseWhileVmsRun(deps, o, reason);
  // Its generation's own stop grace (a hypervisor's or a database's may be long).
  if (isRunning(o))
    await deps.engine.stop(o.id, stopGraceOf(deps, o.identity.container, o.identity.generation));
  await deps.engine.remove(o.id);
  deps.events.publish({
    type: 'state',
    at: deps.clock.now(),
    container: o.identity.container,
    from: o.state,
    to: 'removed',
    reason,
  });
  deps.log.info({ container: o.identity.container, name: o.name, reason }, 'container removed');
}

async function refuseWhileVmsRun(deps: ExecutorDeps, o: ObservedContainer, reason: string): Promise<void> {
  const name = o.identity.container;
  const recorded = deps.state.generation(name, o.identity.generation)?.spec;
  if (recorded?.role !== 'hypervisor') return;
  const vms = await deps.vms.runningVms();
  if (vms.length === 0) return;
  const list = vms.map((v) => `${v.name}(pid ${v.pid})`).join(', ');
  const message =
    `refusing to remove hypervisor ${name} (${reason}) while ${vms.length} VM(s) run: ${list}; ` +
    'they would keep running with no hypervisor to manage them. Restore its definition, or migrate or ' +
    'stop the VMs: spcd retries the removal with backoff and removes it once none run.';
  deps.events.publish({
    type: 'state',
    at: deps.clock.now(),
    container: name,
    from: o.state,
    to: 'kept',
    reason: message,
  });
  throw vmSafetyRefused(deps, 'remove', message, { container: name, vms: vms.map((v) => v.name) });
}

/**
 * Starts a container that does not run, as an operator's start does: no
 * event (the operator's operation reports it). One that runs is left alone.
 */
export async function resumeContainer(
  deps: Pick<ExecutorDeps, 'engine'>,
  o: ObservedContainer,
): Promise<void> {
  if (!isRunning(o)) await deps.engine.start(o.id);
}

/**
 * The one place spcd stops a container it keeps: an operator's stop (stopped
 * by the operator until their start) and a check's action stop (left failed for an
 * operator) both come here, within the container's own grace. Returns when
 * the stop began, on the injected clock.
 */
export async function stopContainer(
  deps: Pick<ExecutorDeps, 'engine' | 'clock'>,
  o: ObservedContainer,
  stopGraceMs: number,
): Promise<{ readonly stoppedAt: number }> {
  const stoppedAt = deps.clock.now();
  await deps.engine.stop(o.id, stopGraceMs);
  return { stoppedAt };
}

/**
 * The one place spcd restarts a container: an operator's restart and a heal
 * both come here (as a `restart` step). Times the window on the injected clock.
 */
export async function restartContainer(
  deps: Pick<ExecutorDeps, 'engine' | 'clock'>,
  o: ObservedContainer,
  stopGraceMs: number,
): Promise<{ readonly stoppedAt: number; readonly windowMs: number }> {
  const { stoppedAt } = await stopContainer(deps, o, stopGraceMs);
  await deps.engine.start(o.id);
  return { stoppedAt, windowMs: deps.clock.now() - stoppedAt };
}
