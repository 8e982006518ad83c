import type Dockerode from 'dockerode';
import { SpcdError } from '../errors.js';
import { DEADLINES } from './deadlines.js';
import { withDeadline } from './map-error.js';
import type { CallOptions, VolumeCreateRequest, VolumeInfo } from './types.js';

interface VolumeInspect {
  Name: string;
  Driver: string;
  Labels: Record<string, string> | null;
}

/** A named volume as the engine holds it; undefined when it has none of that name. */
export async function inspectVolume(
  docker: Dockerode,
  name: string,
  o?: CallOptions,
): Promise<VolumeInfo | undefined> {
  try {
    const info = (await withDeadline(
      `inspect volume ${name}`,
      DEADLINES.volumeInspect,
      o?.signal,
      (abortSignal) => docker.getVolume(name).inspect({ abortSignal } as object),
    )) as unknown as VolumeInspect;
    return { name: info.Name, driver: info.Driver, labels: info.Labels ?? {} };
  } catch (err) {
    if (err instanceof SpcdError && err.code === 'ENGINE_NOT_FOUND') return undefined;
    throw err;
  }
}

/**
 * Creates a local volume with its labels, then answers what the engine holds
 * under that name: the engine answers an existing volume of the same driver
 * as it is, without its labels changed. Nothing here removes a volume.
 */
export async function createVolume(
  docker: Dockerode,
  req: VolumeCreateRequest,
  o?: CallOptions,
): Promise<VolumeInfo> {
  await withDeadline(`create volume ${req.name}`, DEADLINES.volumeCreate, o?.signal, (abortSignal) =>
    docker.createVolume({ Name: req.name, Driver: 'local', Labels: { ...req.labels }, abortSignal }),
  );
  const made = await inspectVolume(docker, req.name, o);
  if (!made)
    throw new SpcdError('ENGINE_NOT_FOUND', `volume ${req.name} is gone right after it was created`, {
      volume: req.name,
    });
  return made;
}
