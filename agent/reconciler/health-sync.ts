import type { Clock } from '../model/clock.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import type { HealthGate, WatchedSpec } from '../executor/ports.js';
import type { ContainerHealthStatus, HealthAction, HealthChange, WatchTarget } from '../health/types.js';

/** What health sync needs of the health room (HealthManager). */
export interface HealthPort {
  watch(target: WatchTarget): void;
  unwatch(name: string): void;
  update(
    name: string,
    patch: { containerId?: string; dockerHealth?: ObservedContainer['dockerHealth'] },
  ): void;
  onAction(listener: (a: HealthAction) => void): () => void;
  onChange(listener: (c: HealthChange) => void): () => void;
  /** The container's status now (undefined: not watched, it has no checks or does not run). */
  snapshot(name: string): { readonly status: ContainerHealthStatus } | undefined;
  pause(name: string): void;
  resume(name: string): void;
  waitHealthy(name: string, containerId: string, deadlineMs: number, signal?: AbortSignal): Promise<void>;
}

/** One container as a pass sees it. */
export interface SyncItem {
  readonly spec: ContainerSpec;
  readonly primary: ObservedContainer | undefined;
  /** An operation had it locked while the listing ran: its watch is the operation's business. */
  readonly locked: boolean;
}

/** One watch per started instance: a restart keeps the container's id but starts a new start period. */
const instanceOf = (c: ObservedContainer): string => `${c.id}@${c.startedAt}`;

/**
 * The only owner of health watches, and the only builder of a watch target.
 * A pass syncs the watches of free containers to what runs; an operation
 * that has a container locked (the upgrade's health gate, a rollback) points the
 * watch through the same object, as the executor's HealthGate.
 */
export class HealthSync implements HealthGate {
  /**
   * The instance the passes last watched, per container. An operation's
   * watch does not change it: the first free pass after an upgrade watches the
   * new instance afresh, and after a rollback that pointed the watch back at
   * the instance the pass had watched, keeps it.
   */
  private readonly watched = new Map<string, string>();

  constructor(
    private readonly health: HealthPort,
    private readonly clock: Clock,
  ) {}

  onAction(listener: (a: HealthAction) => void): () => void {
    return this.health.onAction(listener);
  }

  /**
   * Whether the checks of a container that has some passed since it started
   * (the planner's depends_on gate): not while it is still starting, is
   * unhealthy, or is not watched yet.
   */
  ready(name: string): boolean {
    const s = this.health.snapshot(name)?.status;
    return s === 'healthy' || s === 'unknown';
  }

  /** Calls `listener` with the name of each container whose checks turn healthy. */
  onReady(listener: (name: string) => void): () => void {
    return this.health.onChange((c) => {
      if (c.status === 'healthy' && c.previous !== 'healthy') listener(c.name);
    });
  }

  /** Watches running containers with checks; drops watches of the others. */
  sync(items: readonly SyncItem[]): void {
    const live = new Set<string>();
    for (const { spec, primary: p, locked } of items) {
      if (!p || p.state !== 'running' || spec.healthchecks.length === 0) continue;
      live.add(spec.name);
      if (locked) continue;
      const was = this.watched.get(spec.name);
      if (was === instanceOf(p)) {
        if (p.dockerHealth) this.health.update(spec.name, { dockerHealth: p.dockerHealth });
        continue;
      }
      if (was !== undefined) this.health.unwatch(spec.name);
      this.watched.set(spec.name, instanceOf(p));
      this.place(spec, p);
    }
    for (const name of [...this.watched.keys()]) if (!live.has(name)) this.unwatch(name);
  }

  /** Stops probing it (spcd is about to stop and start it); the next pass watches the new start afresh. */
  forget(name: string): void {
    this.unwatch(name);
  }

  // The executor's HealthGate.

  watchInstance(spec: WatchedSpec, c: ObservedContainer): void {
    this.place(spec, c);
  }

  unwatch(name: string): void {
    this.watched.delete(name);
    this.health.unwatch(name);
  }

  pause(name: string): void {
    this.health.pause(name);
  }

  resume(name: string): void {
    this.health.resume(name);
  }

  waitHealthy(name: string, containerId: string, deadlineMs: number, signal?: AbortSignal): Promise<void> {
    return this.health.waitHealthy(name, containerId, deadlineMs, signal);
  }

  /** The one builder of a watch target. */
  private place(spec: WatchedSpec, c: ObservedContainer): void {
    this.health.watch({
      name: spec.name,
      containerId: c.id,
      pid: c.pid,
      network: spec.network,
      pidMode: spec.pid,
      startedAtMs: c.startedAt ? Date.parse(c.startedAt) : this.clock.now(),
      checks: spec.healthchecks,
      ...(c.dockerHealth ? { dockerHealth: c.dockerHealth } : {}),
    });
  }
}
