import type { HealthAction } from '../health/types.js';
import type { DesiredContainer } from '../planner/types.js';
import type { Heals } from './heal.js';
import type { HealthSync } from './health-sync.js';

/** What the reconciler gives its health subscriptions. */
export interface HealthFollower {
  readonly heals: Pick<Heals, 'noteAction'>;
  /** The action is about the instance the last observation shows running, and spcd runs its passes. */
  readonly current: (a: HealthAction) => boolean;
  /** Plans and runs this container's heal now. */
  readonly healNow: (name: string) => void;
  readonly desired: () => readonly DesiredContainer[];
  readonly trigger: () => void;
}

/**
 * The reconciler's two subscriptions to the health room: a check asking for
 * a heal, and a container turning healthy that another depends on (the
 * planner starts a dependent only once its dependencies are ready). Returns
 * the unsubscribe.
 */
export function followHealth(health: HealthSync, f: HealthFollower): () => void {
  const offAction = health.onAction((a) => {
    if (!f.heals.noteAction(a)) return;
    // Plan it at once when the last observation shows this very instance running: a pass may be
    // slow to come (its inspect of another container waits while the engine starts that one).
    if (f.current(a)) f.healNow(a.name);
    f.trigger();
  });
  const offReady = health.onReady((name) => {
    if (f.desired().some((d) => d.spec.dependsOn.includes(name))) f.trigger();
  });
  return () => {
    offAction();
    offReady();
  };
}
