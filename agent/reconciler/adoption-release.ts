import { SpcdError } from '../errors.js';
import type { ExecutorDeps } from '../executor/ports.js';

/** What a release answers: the container, and the id and generation its adoption had (an operation's result). */
export type Released = {
  readonly container: string;
  readonly id: string;
  readonly generation: number;
};

/**
 * Forgets a container's adoption in state.json, its caller having the
 * container locked. The container runs on as it is: no engine call. NOT_FOUND when
 * it is not (or no longer) adopted.
 */
export async function forgetAdoption(
  deps: Pick<ExecutorDeps, 'state' | 'log'>,
  name: string,
): Promise<Released> {
  const was = await deps.state.release(name);
  if (!was) throw new SpcdError('NOT_FOUND', `${name} is not an adopted container`, { container: name });
  deps.log.info({ container: name, id: was.id }, 'adoption released');
  return { container: name, id: was.id, generation: was.generation };
}
