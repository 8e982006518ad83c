import { afterEach, describe, expect, it } from 'vitest';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { SpcdError } from '../../agent/errors.js';
import { gate } from '../../agent/executor/gate.js';
import { HealthManager } from '../../agent/health/manager.js';
import type { HostProbes, ProbeOutcome } from '../../agent/health/types.js';
import { silentLogger } from '../../agent/log.js';
import type { SpcdEvent } from '../../agent/model/events.js';
import type { CheckSpec, ContainerSpec } from '../../agent/model/spec.js';
import { HealthSync } from '../../agent/reconciler/health-sync.js';
import { Reconciler } from '../../agent/reconciler/reconciler.js';
import { publishHealthEvents } from '../../agent/status/health-events.js';
import { registerDaemonMetrics } from '../../agent/status/metrics.js';
import { DaemonStatus } from '../../agent/status/status-view.js';
import { FakeProcess, INSTANCE } from '../support/fake-executor.js';
import { desired, run, until } from '../support/fake-reconciler.js';
import { amqpCheck, containerSpec } from '../support/spec.js';

/**
 * A dependency check over the real health room, the reconciler, the fake
 * engine and the fake clock: however often it fails it asks for no heal and
 * no restart; its dependency's down and up are one event each, the status
 * reads healthy with the dependency down, and the metric follows. A liveness
 * check on the same container still heals.
 */
/** A tcp check every second, failing at the third failure in a row, action restart (amqpCheck's other fields). */
const tcp = (name: string, port: number, extra: Partial<CheckSpec> = {}): CheckSpec => ({
  ...amqpCheck('unused'),
  name,
  probe: { kind: 'tcp', host: '127.0.0.1', port },
  schedule: { kind: 'interval', intervalMs: 1_000 },
  timeoutMs: 500,
  ...extra,
});
const LIVE_PORT = 8774;
const AMQP_PORT = 5672;
const SVC: ContainerSpec = containerSpec('svc', {
  image: 'img:1',
  network: 'host',
  healthchecks: [
    tcp('api', LIVE_PORT),
    // The parser gives a dependency check action none; the health room does not rely on it.
    tcp('amqp', AMQP_PORT, { action: 'restart', dependency: 'rabbitmq' }),
  ],
});

/** tcp probes answered from `open`: a port in it accepts, any other refuses. */
class Ports implements Partial<HostProbes> {
  readonly open = new Set<number>([LIVE_PORT, AMQP_PORT]);
  readonly tried = new Map<number, number>();

  tcp = (_host: string, port: number): Promise<ProbeOutcome> => {
    this.tried.set(port, (this.tried.get(port) ?? 0) + 1);
    const ok = this.open.has(port);
    return Promise.resolve({ ok, exitCode: null, timedOut: false, output: ok ? 'connected' : 'refused' });
  };
}

let proc: FakeProcess | undefined;
let reconciler: Reconciler | undefined;
let health: HealthManager | undefined;
afterEach(async () => {
  await reconciler?.stop();
  await health?.close();
  await proc?.close();
  proc = reconciler = health = undefined;
});

async function started() {
  const p = (proc = await FakeProcess.create());
  p.engine.addImage(SVC.image);
  const ports = new Ports();
  const log = silentLogger();
  const probes = ports as unknown as HostProbes;
  const h = (health = new HealthManager({
    exec: p.engine,
    clock: p.clock,
    log,
    random: () => 0,
    hostProbes: probes,
  }));
  const sync = new HealthSync(h, p.clock);
  p.deps = { ...p.deps, health: sync };
  const rec = (reconciler = new Reconciler({
    engine: p.engine,
    exec: p.deps,
    health: sync,
    events: p.bus,
    log,
    clock: p.clock,
    instance: INSTANCE,
    relistMs: 5_000,
  }));
  publishHealthEvents(h, p.bus, p.clock);
  const metrics = new MetricsRegistry();
  registerDaemonMetrics({
    registry: metrics,
    events: p.bus,
    health: h,
    engineAvailable: () => true,
    definitionsLoaded: () => true,
    quarantined: () => 0,
  });
  const status = new DaemonStatus({
    reconciler: rec,
    state: p.deps.state,
    events: p.bus,
    logs: p.engine,
    health: h,
    definitions: () => [],
    version: 'test',
    instance: INSTANCE,
    hostFacts: async () => ({}),
    plan: async () => ({ items: [], problems: [] }),
  });
  await rec.start([desired(SVC)]);
  await until(p.clock, 'running, free and healthy', () => h.snapshot('svc')?.status === 'healthy');
  const id = p.engine.byName('svc')?.id ?? '';
  const metric = (): string | undefined =>
    metrics
      .render()
      .split('\n')
      .find((l) => l.startsWith('spcd_check_dependency_up{'));
  return { p, rec, ports, h, id, metric, status: () => status.container('svc') };
}

const dependencyEvents = (events: readonly SpcdEvent[]): string[] =>
  events.flatMap((e) =>
    e.type === 'dependency' ? [`${e.container}/${e.check}:${e.dependency} ${e.status}`] : [],
  );

describe('a failing dependency check', () => {
  it('asks for no heal and no restart however often it fails; down and up are one event each; the metric follows', async () => {
    const { p, rec, ports, id, metric, status } = await started();
    const engineCalls = (): number =>
      p.engine.calls.filter((c) => ['stop', 'start', 'kill', 'remove', 'create'].includes(c.kind)).length;
    const before = engineCalls();
    expect(metric()).toBe('spcd_check_dependency_up{container="svc",check="amqp",dependency="rabbitmq"} 1');
    expect(status()).toMatchObject({
      health: 'healthy',
      dependencies: [{ check: 'amqp', dependency: 'rabbitmq', status: 'up' }],
    });

    ports.open.delete(AMQP_PORT);
    const mark = p.events.length;
    const tried = ports.tried.get(AMQP_PORT) ?? 0;
    await run(p.clock, 60_000, 250);
    // About 60 failures: the threshold (3) crossed about 20 times.
    expect((ports.tried.get(AMQP_PORT) ?? 0) - tried).toBeGreaterThanOrEqual(55);
    expect(engineCalls()).toBe(before);
    expect(p.engine.byName('svc')?.id).toBe(id);
    expect(p.engine.byName('svc')?.state).toBe('running');
    expect(rec.factsOf('svc')).toMatchObject({ restartCount: 0, pendingHeal: null, failed: null });
    expect(dependencyEvents(p.events)).toEqual(['svc/amqp:rabbitmq down']);
    // The container's health events say nothing of the dependency check.
    expect(
      p.events
        .slice(mark)
        .filter((e) => e.type === 'health' && (e.status !== 'healthy' || e.check === 'amqp')),
    ).toEqual([]);
    expect(metric()).toBe('spcd_check_dependency_up{container="svc",check="amqp",dependency="rabbitmq"} 0');
    expect(status()).toMatchObject({
      state: 'running',
      health: 'healthy',
      dependencies: [{ check: 'amqp', dependency: 'rabbitmq', status: 'down' }],
    });

    ports.open.add(AMQP_PORT);
    await until(p.clock, 'the dependency is up', () => dependencyEvents(p.events).length === 2);
    await run(p.clock, 10_000, 250);
    expect(dependencyEvents(p.events)).toEqual(['svc/amqp:rabbitmq down', 'svc/amqp:rabbitmq up']);
    expect(metric()).toBe('spcd_check_dependency_up{container="svc",check="amqp",dependency="rabbitmq"} 1');
    expect(status()?.dependencies).toEqual([{ check: 'amqp', dependency: 'rabbitmq', status: 'up' }]);
    expect(engineCalls()).toBe(before);
  });

  it('leaves a liveness check on the same container to heal it, and reports the dependency once across the restart', async () => {
    const { p, rec, ports, h, id } = await started();
    const restarts = (): number => p.engine.calls.filter((c) => c.kind === 'start' && c.arg === id).length;
    const before = restarts();
    ports.open.delete(AMQP_PORT);
    await until(p.clock, 'the dependency is down', () => dependencyEvents(p.events).length === 1);
    ports.open.delete(LIVE_PORT);
    await until(p.clock, 'the liveness check heals it', () => rec.factsOf('svc').restartCount === 1, {
      stepMs: 100,
    });
    expect(restarts()).toBeGreaterThan(before);
    expect(p.events).toContainEqual(
      expect.objectContaining({ type: 'health', container: 'svc', check: 'api', status: 'unhealthy' }),
    );
    // The restarted instance's checks start afresh; its dependency, still down, is not reported twice.
    ports.open.add(LIVE_PORT);
    await run(p.clock, 20_000, 250);
    expect(h.snapshot('svc')?.dependencies).toEqual([
      { check: 'amqp', dependency: 'rabbitmq', status: 'down' },
    ]);
    expect(rec.factsOf('svc').restartCount).toBe(1);
    expect(dependencyEvents(p.events)).toEqual(['svc/amqp:rabbitmq down']);
    ports.open.add(AMQP_PORT);
    await run(p.clock, 10_000, 250);
    expect(dependencyEvents(p.events)).toEqual(['svc/amqp:rabbitmq down', 'svc/amqp:rabbitmq up']);
  });
});

describe("the upgrade's health gate (decision 0034)", () => {
  it('waits on the liveness checks only: a dependency check that fails neither holds nor fails it', async () => {
    const { p, h, ports, id } = await started();
    ports.open.delete(AMQP_PORT);
    await until(p.clock, 'the dependency is down', () => dependencyEvents(p.events).length === 1);
    let verdict: string | undefined;
    h.waitHealthy('svc', id, p.clock.now() + 5_000).then(
      () => (verdict = 'passed'),
      (e: Error) => (verdict = e.message),
    );
    // Before the gate's 5 s deadline, which would fail it.
    await until(p.clock, 'the gate decides', () => verdict !== undefined, { maxFakeMs: 4_000 });
    expect(verdict).toBe('passed');
    expect(h.snapshot('svc')?.dependencies).toEqual([
      { check: 'amqp', dependency: 'rabbitmq', status: 'down' },
    ]);
  });

  it('a container whose only checks are dependency checks passes as one without checks (minReady)', async () => {
    const p = (proc = await FakeProcess.create());
    const spec = containerSpec('svc', {
      image: 'img:1',
      network: 'host',
      healthchecks: [SVC.healthchecks[1]!],
    });
    const c = await p.first(spec);
    p.health.verdict = () => new SpcdError('HEALTH_GATE_FAILED', 'the dependency is down');
    await gate(p.deps, 'svc', c.id, spec);
    expect(p.health.watched.size).toBe(0);
  });
});
