/**
 * NodeReporter: publishes each set's generations and health on this node's
 * Node object, as the annotation spcd.openstack.org/sets (merge patch on
 * nodes) and the condition SpcdComputeHealthy (strategic merge patch on
 * nodes/status, which merges conditions by type and leaves the kubelet's
 * alone). Throttled: at most one publish per minIntervalMs, and only when
 * the content changed.
 */
import type { SetStatus } from '../api/types.js';
import { isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { KubeApi } from './client.js';

export const SETS_ANNOTATION = 'spcd.openstack.org/sets';
export const CONDITION_TYPE = 'SpcdComputeHealthy';

export interface SetReport {
  /** Set path, e.g. "nova/compute". */
  readonly name: string;
  readonly health: 'healthy' | 'unhealthy' | 'unknown';
  /** Container name -> current generation. */
  readonly generations: Readonly<Record<string, number>>;
  /** Containers that make the set unhealthy, for the condition's message. */
  readonly unhealthy: readonly string[];
}

export interface NodeReport {
  readonly engineAvailable: boolean;
  readonly sets: readonly SetReport[];
}

/** Flattens the daemon's SetStatus tree into per-set reports. */
export function reportFromSets(sets: readonly SetStatus[], engineAvailable = true): NodeReport {
  const out: SetReport[] = [];
  const walk = (s: SetStatus) => {
    if (s.containers.length > 0) {
      const generations: Record<string, number> = {};
      const unhealthy: string[] = [];
      let unknown = false;
      for (const c of s.containers) {
        generations[c.name] = c.generation;
        if (c.state === 'stopped') continue; // an operator's stop is not ill health
        if (c.state === 'unknown') unknown = true;
        else if (c.state !== 'running' || c.health === 'unhealthy') unhealthy.push(c.name);
      }
      out.push({
        name: s.path || s.name,
        health: unhealthy.length > 0 ? 'unhealthy' : unknown ? 'unknown' : 'healthy',
        generations,
        unhealthy,
      });
    }
    for (const child of s.sets) walk(child);
  };
  for (const s of sets) walk(s);
  return { engineAvailable, sets: out };
}

interface Condition {
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: string;
  readonly message: string;
}

export function conditionFor(r: NodeReport): Condition {
  if (!r.engineAvailable)
    return { status: 'Unknown', reason: 'EngineUnavailable', message: 'the Docker engine does not answer' };
  const bad = r.sets.filter((s) => s.health === 'unhealthy');
  if (bad.length > 0)
    return {
      status: 'False',
      reason: 'SetsUnhealthy',
      message: bad.map((s) => `${s.name}: ${s.unhealthy.join(', ')}`).join('; '),
    };
  const unknown = r.sets.filter((s) => s.health === 'unknown');
  if (unknown.length > 0)
    return { status: 'Unknown', reason: 'HealthUnknown', message: unknown.map((s) => s.name).join(', ') };
  return { status: 'True', reason: 'AllSetsHealthy', message: `${r.sets.length} set(s) healthy` };
}

export function annotationFor(r: NodeReport): string {
  const value: Record<string, { health: string; generations: Record<string, number> }> = {};
  for (const s of [...r.sets].sort((a, b) => a.name.localeCompare(b.name))) {
    const gens: Record<string, number> = {};
    for (const k of Object.keys(s.generations).sort()) gens[k] = s.generations[k]!;
    value[s.name] = { health: s.health, generations: gens };
  }
  return JSON.stringify(value);
}

export interface NodeReporterDeps {
  readonly api: KubeApi;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly log: Logger;
}

export class NodeReporter {
  private readonly minIntervalMs: number;
  private pending: NodeReport | undefined;
  private inFlight: Promise<void> | undefined;
  private cancelTimer: (() => void) | undefined;
  private lastAt: number | undefined;
  private seeded = false;
  private lastAnnotation: string | undefined;
  private lastCondition: string | undefined;
  private stopped = false;
  /** Publishes that reached the API server (annotation or condition). */
  patches = 0;

  constructor(
    private readonly deps: NodeReporterDeps,
    opts: { minIntervalMs?: number } = {},
  ) {
    this.minIntervalMs = opts.minIntervalMs ?? 10_000;
  }

  /** Takes the newest report; publishes now or when the throttle allows. Never throws. */
  report(r: NodeReport): void {
    if (this.stopped) return;
    this.pending = r;
    this.kick();
  }

  /** Resolves when nothing is in flight (tests, shutdown). Does not wait for the throttle timer. */
  async flush(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private kick(): void {
    if (this.inFlight || this.cancelTimer || !this.pending || this.stopped) return;
    const now = this.deps.clock.now();
    const wait = this.lastAt === undefined ? 0 : Math.max(0, this.lastAt + this.minIntervalMs - now);
    if (wait > 0) {
      this.cancelTimer = this.deps.clock.setTimer(wait, () => {
        this.cancelTimer = undefined;
        this.kick();
      });
      return;
    }
    const r = this.pending;
    this.pending = undefined;
    this.inFlight = this.publish(r).finally(() => {
      this.inFlight = undefined;
      this.kick();
    });
  }

  private async publish(r: NodeReport): Promise<void> {
    const { api, nodeName, clock, log } = this.deps;
    try {
      if (!this.seeded) {
        const node = await api.readNode(nodeName);
        this.lastAnnotation = node.metadata?.annotations?.[SETS_ANNOTATION];
        const c = node.status?.conditions?.find((x) => x.type === CONDITION_TYPE);
        if (c)
          this.lastCondition = JSON.stringify({ status: c.status, reason: c.reason, message: c.message });
        this.seeded = true;
      }
      const annotation = annotationFor(r);
      const cond = conditionFor(r);
      const condKey = JSON.stringify(cond);
      let changed = false;
      if (annotation !== this.lastAnnotation) {
        await api.patchNode(nodeName, { metadata: { annotations: { [SETS_ANNOTATION]: annotation } } });
        this.lastAnnotation = annotation;
        changed = true;
        this.patches++;
      }
      if (condKey !== this.lastCondition) {
        const prevStatus = this.lastCondition
          ? (JSON.parse(this.lastCondition) as Condition).status
          : undefined;
        const now = new Date(clock.now()).toISOString().replace(/\.\d+Z$/, 'Z');
        await api.patchNodeStatus(nodeName, {
          status: {
            conditions: [
              {
                type: CONDITION_TYPE,
                ...cond,
                lastHeartbeatTime: now,
                ...(prevStatus !== cond.status ? { lastTransitionTime: now } : {}),
              },
            ],
          },
        });
        this.lastCondition = condKey;
        changed = true;
        this.patches++;
      }
      if (changed) this.lastAt = clock.now();
    } catch (err) {
      // Keep the newest report and retry after the throttle interval.
      this.pending = this.pending ?? r;
      this.lastAt = clock.now();
      log.warn({ code: isSpcdError(err) ? err.code : 'INTERNAL', node: nodeName }, 'node report failed');
    }
  }
}
