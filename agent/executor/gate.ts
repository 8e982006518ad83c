import { SpcdError } from '../errors.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import { isDependencyCheck, type ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from './ports.js';

/**
 * The health gate: every liveness check passes, or (none) the container stays
 * up minReadyMs. With checks, the gate points the health room at the new
 * instance itself (the reconciler does not watch a container while an
 * operation has it locked), waits until an absolute deadline, and fails at once
 * when the new container exits instead of waiting for the deadline.
 *
 * Dependency checks neither hold nor fail the gate (decision 0034): a service
 * outside the container that is down says nothing of the new generation, and
 * the old one would not reach it either. They are watched with the others, so
 * the new generation's dependency shows in the status, the events and the
 * metric as soon as its checks say so.
 */
export async function gate(
  deps: ExecutorDeps,
  name: string,
  id: string,
  spec: ContainerSpec,
  signal?: AbortSignal,
): Promise<void> {
  if (spec.healthchecks.some((check) => !isDependencyCheck(check))) {
    const c = await deps.engine.inspect(id);
    if (!c || !isRunning(c)) throw exitedBeforeReady(name, c);
    deps.health.watchInstance(spec, c);
    const ctl = new AbortController();
    const onOuter = (): void => ctl.abort(signal?.reason);
    if (signal?.aborted) ctl.abort(signal.reason);
    else signal?.addEventListener('abort', onOuter, { once: true });
    try {
      await Promise.race([
        deps.health.waitHealthy(name, id, deps.clock.now() + deps.gateDeadlineMs, ctl.signal),
        failOnExit(deps, name, id, ctl.signal),
      ]);
    } finally {
      ctl.abort();
      signal?.removeEventListener('abort', onOuter);
    }
    return;
  }
  const until = deps.clock.now() + deps.minReadyMs;
  for (;;) {
    const c = await deps.engine.inspect(id);
    if (!c || !isRunning(c)) throw exitedBeforeReady(name, c);
    if (deps.clock.now() >= until) return;
    await new Promise<void>((r) => deps.clock.setTimer(Math.min(100, until - deps.clock.now()), r));
  }
}

function exitedBeforeReady(name: string, c: ObservedContainer | undefined): SpcdError {
  return new SpcdError(
    'HEALTH_GATE_FAILED',
    `${name} exited${c ? ` with ${c.exitCode}` : ''} before it was ready`,
    { container: name, exitCode: c?.exitCode ?? null },
  );
}

/** Rejects when the container stops running; resolves quietly once signal aborts. */
async function failOnExit(deps: ExecutorDeps, name: string, id: string, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    await new Promise<void>((r) => {
      const cancel = deps.clock.setTimer(GATE_EXIT_POLL_MS, r);
      signal.addEventListener('abort', () => (cancel(), r()), { once: true });
    });
    if (signal.aborted) return;
    const c = await deps.engine.inspect(id);
    if (!c || !isRunning(c)) throw exitedBeforeReady(name, c);
  }
}

const GATE_EXIT_POLL_MS = 250;

/** After a rollback the health room watches the old instance again (the gate had pointed it at the new one). */
export async function rewatchOld(
  deps: ExecutorDeps,
  name: string,
  old: ObservedContainer,
  fallback: ContainerSpec,
): Promise<void> {
  const spec = deps.state.generation(name, old.identity.generation)?.spec ?? fallback;
  const c = await deps.engine.inspect(old.id);
  if (spec.healthchecks.length === 0 || !c || !isRunning(c)) {
    deps.health.unwatch(name);
    return;
  }
  deps.health.watchInstance(spec, c);
}
