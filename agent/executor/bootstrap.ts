import { SpcdError, toSpcdError } from '../errors.js';
import type { Identity } from '../model/labels.js';
import { LABEL } from '../model/labels.js';
import type { ContainerSpec } from '../model/spec.js';
import type { GenerationRecord } from '../state/store.js';
import type { LogEngine } from '../engine/types.js';
import type { ExecutorDeps, PreparedExtras } from './ports.js';
import { removeTaskOrphans } from './task-orphans.js';
import { escapeControl } from '../model/text.js';

const OUTPUT_TAIL = 64 * 1024;

/**
 * Runs a container's one-shot bootstrap tasks (a db sync, say) before its
 * first start and before each upgrade: same image, config and mounts, the
 * task's command (or the container's own start) and environment, a timeout
 * and the exit codes it accepts. Output is kept
 * with the generation. A failure stops the start or upgrade and touches no
 * running container.
 */
export async function runBootstrap(
  deps: ExecutorDeps,
  spec: ContainerSpec,
  identity: Identity,
  extras: PreparedExtras,
  operationId: string,
): Promise<NonNullable<GenerationRecord['bootstrap']>> {
  const results: NonNullable<GenerationRecord['bootstrap']> = [];
  // Never two of a task side by side: a dead spcd's task container goes first.
  if (spec.bootstrap.length > 0) await removeTaskOrphans(deps, spec.name);
  for (const task of spec.bootstrap) {
    const name = `${spec.name}.g${identity.generation}.task-${task.name}`;
    const step = (outcome: 'begin' | 'done' | 'failed', detail?: string): void =>
      deps.events.publish({
        type: 'upgrade-step',
        at: deps.clock.now(),
        operationId,
        container: spec.name,
        step: `bootstrap:${task.name}`,
        generation: identity.generation,
        outcome,
        ...(detail ? { detail } : {}),
      });
    step('begin');
    const id = await deps.engine.create({
      spec,
      identity,
      name,
      // Without a command the container starts as usual (a Kolla image: kolla_start, so
      // kolla_set_configs runs), with the task's environment (KOLLA_BOOTSTRAP, say).
      ...(task.command ? { command: task.command } : {}),
      extraBinds: extras.extraBinds,
      extraEnv: { ...extras.extraEnv, ...(task.environment ?? {}) },
      extraLabels: { [LABEL.task]: task.name },
    });
    let exitCode: number | null = null;
    let failure: string | undefined;
    try {
      await deps.engine.start(id);
      try {
        exitCode = await deps.engine.wait(id, task.timeoutMs);
      } catch (err) {
        const e = toSpcdError(err);
        if (e.code !== 'ENGINE_TIMEOUT') throw e;
        await deps.engine.kill(id, 'SIGKILL');
        failure = `timed out after ${task.timeoutMs} ms`;
      }
      if (!failure && !task.acceptExitCodes.includes(exitCode ?? -1)) {
        failure = `exited with ${exitCode} (accepted: ${task.acceptExitCodes.join(', ')})`;
      }
    } finally {
      const output = await collectOutput(deps.engine, id);
      results.push({ name: task.name, exitCode, output });
      await deps.engine.remove(id).catch(() => undefined);
    }
    step(failure ? 'failed' : 'done', failure);
    if (failure) {
      await deps.state.setBootstrap(spec.name, identity.generation, results);
      throw new SpcdError('BOOTSTRAP_FAILED', `bootstrap task ${task.name} of ${spec.name} ${failure}`, {
        container: spec.name,
        task: task.name,
        exitCode,
        output: results[results.length - 1]?.output.slice(-2048) ?? '',
      });
    }
  }
  if (results.length > 0) await deps.state.setBootstrap(spec.name, identity.generation, results);
  return results;
}

async function collectOutput(logs: LogEngine, id: string): Promise<string> {
  const lines: string[] = [];
  await new Promise<void>((resolve) => {
    logs
      .logs(id, { tail: 2000, follow: false, onLine: (l) => lines.push(l), onEnd: resolve })
      .catch(() => resolve());
  });
  const text = lines.join('\n');
  // container-controlled text: escaped before it reaches state, errors, events or a terminal
  return escapeControl(text.length > OUTPUT_TAIL ? text.slice(-OUTPUT_TAIL) : text, { keepLines: true });
}
