/**
 * The health room's changes as events on the bus (the API's /v1/events, the
 * audit log, Kubernetes): a container's or a liveness check's status change
 * as `health`; a dependency check's down and up as `dependency` (its own
 * status changes are not the container's health).
 */
import type { DependencyChange, HealthChange } from '../health/types.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';

export interface HealthEventSource {
  onChange(listener: (c: HealthChange) => void): () => void;
  onDependency(listener: (d: DependencyChange) => void): () => void;
}

export function publishHealthEvents(health: HealthEventSource, events: EventBus, clock: Clock): void {
  health.onChange((c) => {
    // A dependency check's status is not the container's (it leaves c.status as it was).
    if (c.check?.dependency !== undefined) return;
    const check = c.check;
    events.publish({
      type: 'health',
      at: clock.now(),
      container: c.name,
      ...(check ? { check: check.name } : {}),
      status: c.status,
      ...(check?.lastResult ? { output: check.lastResult.output } : {}),
    });
  });
  health.onDependency((d) =>
    events.publish({
      type: 'dependency',
      at: clock.now(),
      container: d.name,
      check: d.check,
      dependency: d.dependency,
      status: d.status,
      ...(d.output ? { output: d.output } : {}),
    }),
  );
}
