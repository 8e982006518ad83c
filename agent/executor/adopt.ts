import { SpcdError } from '../errors.js';
import { adoptionBlock, type AdoptionRecord } from '../model/adoption.js';
import type { Step } from '../planner/types.js';
import type { ExecutorDeps } from './ports.js';

/**
 * The operator's adoption: checks once more that the container under the
 * name is the one planned, running, started at the same moment and still
 * matching its definition, then records it as the next generation in one
 * write (StateStore.adopt). No engine call changes the container: it is not
 * stopped, restarted or recreated.
 */
export async function adoptContainer(
  deps: ExecutorDeps,
  s: Step<'adopt'>,
  operationId: string,
): Promise<AdoptionRecord> {
  const name = s.desired.spec.name;
  if (s.managed)
    throw new SpcdError(
      'CONFLICT',
      `${name} is already spcd's (generation ${s.managed.identity.generation})`,
      {
        container: name,
      },
    );
  const planned = s.candidate;
  if (!planned)
    throw new SpcdError('NOT_FOUND', `no container without spcd labels runs under the name ${name}`, {
      container: name,
    });
  const blocked = adoptionBlock(planned) ?? (await deps.units?.supervisor(name));
  if (blocked) throw new SpcdError('ADOPT_BLOCKED', `${name}: ${blocked}`, { container: name });
  const request = {
    spec: s.desired.spec,
    identity: {
      instance: deps.instance,
      set: s.desired.spec.set,
      container: name,
      generation: 1,
      specHash: s.desired.specHash,
      configHash: s.desired.configHash,
    },
  };
  const now = await deps.engine.inspectUnlabeled(name, request);
  const same =
    now !== undefined && now.id === planned.container.id && now.startedAt === planned.container.startedAt;
  if (!same || now.state !== 'running')
    throw new SpcdError('ADOPT_BLOCKED', `${name} changed since it was planned; plan again`, {
      container: name,
    });
  const again = adoptionBlock({ container: now });
  if (again) throw new SpcdError('ADOPT_BLOCKED', `${name}: ${again}`, { container: name });
  deps.failpoint('adopt.before-record');
  const record = await deps.state.adopt(
    name,
    {
      image: now.image,
      imageDigest: null,
      specHash: s.desired.specHash,
      configHash: s.desired.configHash,
      spec: s.desired.spec,
    },
    {
      id: now.id,
      name: now.name,
      image: now.image,
      startedAt: now.startedAt,
      adoptedAt: new Date(deps.clock.now()).toISOString(),
      operationId,
    },
  );
  deps.failpoint('adopt.after-record');
  deps.log.info(
    { container: name, id: now.id.slice(0, 12), startedAt: now.startedAt, generation: record.generation },
    'container adopted',
  );
  deps.events.publish({
    type: 'state',
    at: deps.clock.now(),
    container: name,
    from: 'unlabeled',
    to: 'adopted',
    reason: `adopted ${now.id.slice(0, 12)} as generation ${record.generation}`,
  });
  return record;
}
