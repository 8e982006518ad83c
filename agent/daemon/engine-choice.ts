/** --engine: which container engine spcd speaks to, and where its socket is by default. */
import { SpcdError } from '../errors.js';

export type EngineChoice = 'docker' | 'podman';

/** Where each engine's API socket is unless --docker-socket says otherwise (where kolla-ansible has it). */
const ENGINE_SOCKET: Readonly<Record<EngineChoice, string>> = {
  docker: '/var/run/docker.sock',
  podman: '/run/podman/podman.sock',
};

/** --engine: docker, podman or auto (undefined); SETTINGS_INVALID naming the flag otherwise. */
export function engineChoice(value: string): EngineChoice | undefined {
  if (value === 'docker' || value === 'podman') return value;
  if (value === 'auto') return undefined;
  throw new SpcdError('SETTINGS_INVALID', `--engine: '${value}' is not docker, podman or auto`, {
    flag: 'engine',
    value,
  });
}

/** The engine's socket when --docker-socket is not given: Docker's, unless --engine podman. */
export function engineSocket(engine: EngineChoice | undefined): string {
  return ENGINE_SOCKET[engine ?? 'docker'];
}
