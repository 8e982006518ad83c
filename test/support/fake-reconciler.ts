import type {
  ContainerHealthStatus,
  HealthAction,
  HealthChange,
  WatchTarget,
} from '../../agent/health/types.js';
import { silentLogger, type Logger } from '../../agent/log.js';
import type { BackoffPolicy } from '../../agent/model/backoff.js';
import { specHash } from '../../agent/model/hash.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import type { DesiredContainer } from '../../agent/planner/types.js';
import { HealthSync, type HealthPort } from '../../agent/reconciler/health-sync.js';
import { Reconciler } from '../../agent/reconciler/reconciler.js';
import { afterEach } from 'vitest';
import { FakeProcess, INSTANCE } from './fake-executor.js';

/** The health room in memory: records watches; a test fires a check's action by hand. */
export class FakeHealthRoom implements HealthPort {
  readonly watches = new Map<string, WatchTarget>();
  /** Every watch placed, in order (name@containerId). */
  readonly placed: string[] = [];
  private readonly listeners = new Set<(a: HealthAction) => void>();
  /** Each watched container's status: `starting` when watched, then as the test sets it (`setStatus`). */
  private readonly statuses = new Map<string, ContainerHealthStatus>();
  private readonly changeListeners = new Set<(c: HealthChange) => void>();

  watch(target: WatchTarget): void {
    this.watches.set(target.name, target);
    // As the health room: a new watch of a container with checks starts `starting`.
    if (target.checks.length > 0) this.statuses.set(target.name, 'starting');
    else this.statuses.delete(target.name);
    this.placed.push(`${target.name}@${target.containerId}`);
  }

  unwatch(name: string): void {
    this.watches.delete(name);
    this.statuses.delete(name);
  }

  update(): void {}

  snapshot(name: string): { status: ContainerHealthStatus } | undefined {
    const status = this.statuses.get(name);
    return status && { status };
  }

  onChange(listener: (c: HealthChange) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** The container's checks now say `status`; the change is published as the health room does. */
  setStatus(name: string, status: ContainerHealthStatus): void {
    const previous = this.statuses.get(name) ?? 'starting';
    this.statuses.set(name, status);
    const c: HealthChange = {
      name,
      containerId: this.watches.get(name)?.containerId ?? '',
      status,
      previous,
    };
    for (const l of [...this.changeListeners]) l(c);
  }

  onAction(listener: (a: HealthAction) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  pause(): void {}

  resume(): void {}

  async waitHealthy(): Promise<void> {}

  /** A check of `name` failed `failures` times and asks for `action`. */
  fire(name: string, containerId: string, action: 'restart' | 'stop', failures = 3): void {
    const a: HealthAction = {
      name,
      containerId,
      check: 'probe',
      action,
      reason: 'exit 1',
      consecutiveFailures: failures,
      lastOutputs: ['boom'],
    };
    for (const l of [...this.listeners]) l(a);
  }
}

export const desired = (spec: ContainerSpec): DesiredContainer => ({
  spec,
  specHash: specHash(spec),
  configHash: 'none',
});

/** A Reconciler over a FakeProcess's executor, the fake engine and the fake clock. */
export function fakeReconciler(
  p: FakeProcess,
  opts: {
    relistMs?: number;
    backoff?: BackoffPolicy;
    onHeartbeat?: () => void;
    log?: Logger;
    stopDeadlineMs?: number;
  } = {},
): { rec: Reconciler; room: FakeHealthRoom; sync: HealthSync } {
  const room = new FakeHealthRoom();
  const sync = new HealthSync(room, p.clock);
  const deps = { ...p.deps, health: sync };
  p.deps = deps;
  const rec = new Reconciler({
    engine: p.engine,
    exec: deps,
    health: sync,
    events: p.bus,
    log: opts.log ?? silentLogger(),
    clock: p.clock,
    instance: INSTANCE,
    relistMs: opts.relistMs ?? 10_000,
    ...(opts.backoff ? { backoff: opts.backoff } : {}),
    ...(opts.onHeartbeat ? { onHeartbeat: opts.onHeartbeat } : {}),
    ...(opts.stopDeadlineMs !== undefined ? { stopDeadlineMs: opts.stopDeadlineMs } : {}),
  });
  return { rec, room, sync };
}

/** Lets every promise that can settle now settle, and pending I/O callbacks (state and journal files) run. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 0));
}

/** Advances the fake clock in steps, letting each step's promises and I/O settle. */
export async function run(clock: { advance(ms: number): void }, ms: number, step = 500): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(step);
    await settle(5);
  }
}

/**
 * Advances the fake clock `stepMs` at a time until `cond` holds; resolves
 * with the fake time that took. Fails past `maxFakeMs` of fake time or
 * `realMs` (default 10 s) of real time (the machine may be slow; the fake
 * clock is not).
 */
export async function until(
  clock: { advance(ms: number): void },
  what: string,
  cond: () => boolean,
  opts: { stepMs?: number; maxFakeMs?: number; realMs?: number } = {},
): Promise<number> {
  const step = opts.stepMs ?? 10;
  const max = opts.maxFakeMs ?? 60_000;
  const deadline = Date.now() + (opts.realMs ?? 10_000);
  for (let fake = 0; ; fake += step) {
    await settle(3);
    if (cond()) return fake;
    if (fake > max || Date.now() > deadline)
      throw new Error(`gave up waiting for ${what} (${fake} ms of fake time)`);
    clock.advance(step);
  }
}

/**
 * For the tests of one file: `start(specs, images)` gives a FakeProcess and
 * its reconciler with those containers running (the images known to the
 * engine); both are stopped and closed after each test.
 */
export function runningReconcilers(): (
  specs: readonly ContainerSpec[],
  images: readonly string[],
) => Promise<{ p: FakeProcess; rec: Reconciler }> {
  let open: { p: FakeProcess; rec: Reconciler } | undefined;
  afterEach(async () => {
    await open?.rec.stop();
    await open?.p.close();
    open = undefined;
  });
  return async (specs, images) => {
    const p = await FakeProcess.create();
    for (const image of images) p.engine.addImage(image);
    const { rec } = fakeReconciler(p, { relistMs: 60_000 });
    open = { p, rec };
    await rec.start(specs.map((s) => desired(s)));
    await until(p.clock, 'every container running', () =>
      specs.every((s) => rec.primary(s.name)?.state === 'running'),
    );
    return open;
  };
}
