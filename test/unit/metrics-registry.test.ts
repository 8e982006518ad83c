import { describe, expect, it } from 'vitest';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { registerContainerMetrics } from '../../agent/api/metrics.js';
import type { StatusView } from '../../agent/api/types.js';
import { registerDaemonMetrics } from '../../agent/status/metrics.js';
import { isSpcdError } from '../../agent/errors.js';
import { EventBus } from '../../agent/model/events.js';
import { demoContainer, FakeStatus } from '../support/api-fakes.js';

function refuses(f: () => unknown, message: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(isSpcdError(err, 'INTERNAL'), String(err)).toBe(true);
  expect((err as Error).message).toMatch(message);
}

describe('the one metrics registry', () => {
  it('declares each family once, HELP and TYPE before its samples', () => {
    const r = new MetricsRegistry();
    const c = r.counter({ name: 'x_events_total', help: 'Events.\nTwo lines \\ here.', labels: ['kind'] });
    c.inc({ kind: 'a' });
    c.inc({ kind: 'a' }, 2);
    c.inc({ kind: 'b"\\\n' });
    r.gauge({ name: 'x_up', help: 'Up.' }).set({}, 1);
    const h = r.histogram({ name: 'x_seconds', help: 'Time.', labels: ['route'], buckets: [0.5, 0.1] });
    h.observe({ route: '/' }, 0.05);
    h.observe({ route: '/' }, 0.3);
    h.observe({ route: '/' }, 7);
    expect(r.render()).toBe(
      [
        '# HELP x_events_total Events.\\nTwo lines \\\\ here.',
        '# TYPE x_events_total counter',
        'x_events_total{kind="a"} 3',
        'x_events_total{kind="b\\"\\\\\\n"} 1',
        '# HELP x_up Up.',
        '# TYPE x_up gauge',
        'x_up 1',
        '# HELP x_seconds Time.',
        '# TYPE x_seconds histogram',
        'x_seconds_bucket{route="/",le="0.1"} 1',
        'x_seconds_bucket{route="/",le="0.5"} 2',
        'x_seconds_bucket{route="/",le="+Inf"} 3',
        'x_seconds_sum{route="/"} 7.35',
        'x_seconds_count{route="/"} 3',
        '',
      ].join('\n'),
    );
    expect(r.declared().map((f) => [f.name, f.type])).toEqual([
      ['x_events_total', 'counter'],
      ['x_up', 'gauge'],
      ['x_seconds', 'histogram'],
    ]);
  });

  it('refuses what Prometheus conventions forbid', () => {
    const r = new MetricsRegistry();
    r.gauge({ name: 'x_up', help: 'Up.' });
    r.histogram({ name: 'x_seconds', help: 'Time.', buckets: [1] });
    refuses(() => r.gauge({ name: 'x_up', help: 'Again.' }), /x_up is declared twice/);
    refuses(() => r.gauge({ name: 'x_seconds_count', help: 'A histogram series.' }), /declared twice/);
    refuses(() => r.counter({ name: 'x_events', help: 'No suffix.' }), /ends in _total/);
    refuses(() => r.gauge({ name: 'x_open_total', help: 'Gauge.' }), /only counters end in _total/);
    refuses(() => r.gauge({ name: 'x-dash', help: 'Bad name.' }), /not a valid Prometheus name/);
    refuses(() => r.gauge({ name: 'x_a', help: 'Bad label.', labels: ['a-b'] }), /label name 'a-b'/);
    refuses(() => r.gauge({ name: 'x_b', help: 'Reserved.', labels: ['__x'] }), /label name '__x'/);
    refuses(
      () => r.histogram({ name: 'x_h', help: 'le.', labels: ['le'], buckets: [1] }),
      /cannot use label le/,
    );
    refuses(() => r.gauge({ name: 'x_c', help: ' ' }), /no help text/);
    const g = r.gauge({ name: 'x_d', help: 'Labelled.', labels: ['a'] });
    refuses(() => g.set({ b: '1' }, 1), /labels \{b\} do not match the declared \{a\}/);
    const c = r.counter({ name: 'x_e_total', help: 'Up only.' });
    refuses(() => c.inc({}, -1), /only goes up/);
  });
});

describe("the daemon's families", () => {
  function daemon(): { r: MetricsRegistry; bus: EventBus; fail: (n: string, c: string) => void } {
    const r = new MetricsRegistry();
    const bus = new EventBus();
    let failure: ((n: string, c: string) => void) | undefined;
    registerDaemonMetrics({
      registry: r,
      events: bus,
      health: {
        onFailure: (l) => {
          failure = l;
          return () => undefined;
        },
        dependencies: () => [
          {
            container: 'nova_compute',
            states: [
              { check: 'amqp', dependency: 'rabbitmq', status: 'down' },
              { check: 'db', dependency: 'database', status: 'up' },
              { check: 'placement', dependency: 'placement', status: 'unknown' },
            ],
          },
        ],
      },
      engineAvailable: () => false,
      definitionsLoaded: () => true,
      quarantined: () => 2,
    });
    return { r, bus, fail: (n, c) => failure?.(n, c) };
  }

  it('counts upgrade outcomes, VM-safety refusals and failed checks from their sources', () => {
    const { r, bus, fail } = daemon();
    const up = (outcome: 'succeeded' | 'rolled_back', container = 'nova_compute'): void =>
      bus.publish({ type: 'upgrade', at: 0, operationId: 'op', container, kind: 'upgrade', outcome });
    up('succeeded');
    up('rolled_back');
    up('rolled_back');
    bus.publish({
      type: 'vm-safety-refused',
      at: 0,
      container: 'nova_libvirt',
      action: 'remove',
      reason: 'VMs',
    });
    fail('nova_compute', 'port');
    fail('nova_compute', 'port');
    const text = r.render();
    expect(text).toContain(
      'spcd_upgrades_total{container="nova_compute",kind="upgrade",outcome="succeeded"} 1',
    );
    expect(text).toContain(
      'spcd_upgrades_total{container="nova_compute",kind="upgrade",outcome="rolled_back"} 2',
    );
    expect(text).toContain('spcd_vm_safety_refusals_total{container="nova_libvirt",action="remove"} 1');
    expect(text).toContain('spcd_health_check_failures_total{container="nova_compute",check="port"} 2');
    expect(text).toContain('spcd_engine_available 0');
    expect(text).toContain('spcd_definitions_loaded 1');
    expect(text).toContain('spcd_quarantined_containers 2');
  });

  it('shows each dependency check as up (1) or down (0), and leaves out one not known yet', () => {
    const text = daemon().r.render();
    expect(text.split('\n').filter((l) => l.startsWith('spcd_check_dependency_up'))).toEqual([
      'spcd_check_dependency_up{container="nova_compute",check="amqp",dependency="rabbitmq"} 0',
      'spcd_check_dependency_up{container="nova_compute",check="db",dependency="database"} 1',
    ]);
  });
});

describe('the per-container families', () => {
  it('keep the containers retained without a definition (every one while definitions do not load)', () => {
    const r = new MetricsRegistry();
    const status = new FakeStatus();
    const kept = demoContainer('old_agent', 'gone', { generation: 4, state: 'running' });
    const view: StatusView = Object.assign(Object.create(status) as StatusView, {
      sets: () => [],
      retained: () => [kept],
    });
    registerContainerMetrics(r, view);
    const text = r.render();
    expect(text).toContain('spcd_container_state{container="old_agent",set="gone",state="running"} 1');
    expect(text).toContain('spcd_container_generation{container="old_agent",set="gone"} 4');
  });
});
