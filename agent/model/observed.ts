import type { Identity } from './labels.js';

/** What the engine reports about one spcd-labelled container. */
export type EngineState = 'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead';

export interface ObservedContainer {
  readonly id: string;
  /** Docker name without the leading slash. */
  readonly name: string;
  readonly identity: Identity;
  readonly state: EngineState;
  readonly image: string;
  readonly imageId: string;
  /** ISO timestamps as the engine reports them; "" when never started/finished. */
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly exitCode: number;
  /** Host PID of the container's init process; 0 when not running. */
  readonly pid: number;
  /** The image's own Docker HEALTHCHECK status, when the image defines one. */
  readonly dockerHealth?: 'starting' | 'healthy' | 'unhealthy';
}

export function isRunning(c: ObservedContainer): boolean {
  return c.state === 'running' || c.state === 'restarting' || c.state === 'paused';
}
