import Dockerode from 'dockerode';

export const DOCKER_SOCKET = process.env.SPCD_DOCKER_SOCKET ?? '/var/run/docker.sock';

export function docker(): Dockerode {
  return new Dockerode({ socketPath: DOCKER_SOCKET });
}

export interface Inspected {
  Id: string;
  Name: string;
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
