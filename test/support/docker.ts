import type { Readable } from 'node:stream';
import Dockerode from 'dockerode';
import { lineSplitter } from '../../agent/engine/lines.js';

export const DOCKER_SOCKET = process.env.SPCD_DOCKER_SOCKET ?? '/var/run/docker.sock';

/**
 * The engine's command line, for what a test does by hand (kill, exec):
 * Docker's, or Podman's in the Podman lane (vitest.config.ts sets
 * SPCD_ENGINE and CONTAINERS_CONF there).
 */
export const ON_PODMAN = process.env.SPCD_ENGINE === 'podman';
export const ENGINE_CLI = ON_PODMAN ? 'podman' : '/usr/bin/docker';

export function docker(): Dockerode {
  return new Dockerode({ socketPath: DOCKER_SOCKET });
}

export interface Inspected {
  Id: string;
  Name: string;
  RestartCount?: number;
  State: { Status: string; Running: boolean; StartedAt: string; Pid: number; ExitCode: number };
  Config: { Image: string; Labels: Record<string, string> };
  HostConfig: Record<string, unknown>;
}

export async function inspect(name: string): Promise<Inspected | undefined> {
  try {
    return (await docker().getContainer(name).inspect()) as unknown as Inspected;
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs a running container's main process from the host, as a crash or
 * the OOM killer would. Podman's compatible kill API waits for the container
 * to stop, and misses it (up to 20 s) when spcd starts it again at once.
 */
export async function crash(name: string): Promise<void> {
  const c = await inspect(name);
  if (!c?.State.Running || c.State.Pid <= 0) throw new Error(`${name} is not running`);
  process.kill(c.State.Pid, 'SIGKILL');
}

/** Removes every container carrying spcd.instance=<instance> (and only those). */
export async function cleanupInstance(instance: string): Promise<void> {
  const d = docker();
  const list = await d.listContainers({ all: true, filters: { label: [`spcd.instance=${instance}`] } });
  await Promise.all(
    list.map((c) =>
      d
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
}

export async function containersOf(instance: string): Promise<Dockerode.ContainerInfo[]> {
  return docker().listContainers({ all: true, filters: { label: [`spcd.instance=${instance}`] } });
}

export interface EngineEventRecord {
  readonly id: string;
  readonly name: string;
  /** "exec_start: sh -c ..." is recorded as "exec_start". */
  readonly action: string;
  /** ms since the epoch, from the engine's timeNano. */
  readonly at: number;
}

/** Records the engine's container events matching `filters`, from now on, with the engine's own times. */
export async function recordContainerEvents(filters: {
  label: string[];
  event?: string[];
}): Promise<{ readonly seen: EngineEventRecord[]; close(): void }> {
  const seen: EngineEventRecord[] = [];
  const stream = (await docker().getEvents({
    filters: { type: ['container'], ...filters },
  })) as unknown as Readable;
  stream.on(
    'data',
    lineSplitter((line) => {
      const e = JSON.parse(line) as {
        id: string;
        Action: string;
        timeNano: number;
        Actor: { Attributes: Record<string, string> };
      };
      seen.push({
        id: e.id,
        name: e.Actor.Attributes.name ?? '',
        action: e.Action.split(':')[0]!,
        at: Math.floor(e.timeNano / 1e6),
      });
    }),
  );
  stream.on('error', () => undefined);
  return { seen, close: () => stream.destroy() };
}
