import { SpcdError, toSpcdError } from '../errors.js';
import { LABEL, VOLUME_LABEL, volumeLabels } from '../model/labels.js';
import { volumeNames, type ContainerSpec } from '../model/spec.js';
import type { ExecutorDeps } from './ports.js';

/**
 * Makes sure every named volume `spec` binds exists before a container of it
 * (or one of its bootstrap tasks) is created: the engine would make a missing
 * one itself, unlabelled. A missing volume is created with spcd's labels and
 * logged; an existing one (kolla-ansible's, an operator's) is used as it is,
 * never relabelled. Docker fills an empty volume from the image when a
 * container that binds it is created. spcd never removes a volume
 * (docs/decisions/0033-named-volumes.md).
 */
export async function ensureVolumes(deps: ExecutorDeps, spec: ContainerSpec): Promise<void> {
  for (const volume of volumeNames(spec)) {
    try {
      if (await deps.engine.volumeInfo(volume)) continue;
      const made = await deps.engine.createVolume({
        name: volume,
        labels: volumeLabels(deps.instance, spec.name),
      });
      // Containers that share a volume (kolla_logs) may be created side by side: the engine
      // answers the later ones with the volume the first made.
      const ours =
        made.labels[VOLUME_LABEL.container] === spec.name && made.labels[LABEL.instance] === deps.instance;
      deps.log.info(
        { container: spec.name, volume, driver: made.driver, labels: made.labels },
        ours ? 'volume created' : 'volume made meanwhile: used as it is',
      );
    } catch (err) {
      const e = toSpcdError(err);
      // The engine itself gone or slow: its own error, as for any other call.
      if (e.code === 'ENGINE_UNAVAILABLE' || e.code === 'ENGINE_TIMEOUT') throw e;
      throw new SpcdError(
        'VOLUME_CREATE_FAILED',
        `cannot create volume ${volume} for ${spec.name}: ${e.message}`,
        { container: spec.name, volume, cause: e.code },
        { cause: err },
      );
    }
  }
}
