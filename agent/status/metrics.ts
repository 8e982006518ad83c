/**
 * The daemon's own families in the one registry: what only the daemon knows
 * (the engine, the definitions, the quarantine) read at each scrape, and
 * counters fed from the event bus and the health room. The alert rules in
 * deploy/prometheus/ read these (docs/reference/metrics.md, docs/reference/alerting.md).
 */
import type { MetricsRegistry } from '../api/registry.js';
import type { DependencyState } from '../health/types.js';
import type { EventBus } from '../model/events.js';

export interface DaemonMetricsDeps {
  readonly registry: MetricsRegistry;
  readonly events: EventBus;
  readonly health: {
    onFailure(listener: (name: string, check: string) => void): () => void;
    dependencies(): readonly { readonly container: string; readonly states: readonly DependencyState[] }[];
  };
  readonly engineAvailable: () => boolean;
  readonly definitionsLoaded: () => boolean;
  /** Containers left alone until an operator clears them (RECOVERY_QUARANTINED). */
  readonly quarantined: () => number;
}

export function registerDaemonMetrics(d: DaemonMetricsDeps): void {
  const { registry } = d;
  const one = (value: () => number) => () => [{ labels: {}, value: value() }];
  registry.collect(
    'gauge',
    { name: 'spcd_engine_available', help: 'Whether the Docker engine answers (1) or not (0).' },
    one(() => +d.engineAvailable()),
  );
  registry.collect(
    'gauge',
    {
      name: 'spcd_definitions_loaded',
      help: 'Whether the definitions on disk are in force (1) or spcd keeps what runs (0).',
    },
    one(() => +d.definitionsLoaded()),
  );
  registry.collect(
    'gauge',
    {
      name: 'spcd_quarantined_containers',
      help: 'Containers whose journal entry could not be finished or undone, left alone until cleared.',
    },
    one(() => d.quarantined()),
  );
  registry.collect(
    'gauge',
    {
      name: 'spcd_check_dependency_up',
      help: 'Whether each dependency check of a running container sees its dependency up (1) or down (0); absent until known.',
      labels: ['container', 'check', 'dependency'],
    },
    () =>
      d.health.dependencies().flatMap(({ container, states }) =>
        states.flatMap((s) =>
          s.status === 'unknown'
            ? []
            : [
                {
                  labels: { container, check: s.check, dependency: s.dependency },
                  value: +(s.status === 'up'),
                },
              ],
        ),
      ),
  );
  const upgrades = registry.counter({
    name: 'spcd_upgrades_total',
    help: 'Upgrade transactions ended (upgrade, recreate, rollback), by container, kind and outcome.',
    labels: ['container', 'kind', 'outcome'],
  });
  const refusals = registry.counter({
    name: 'spcd_vm_safety_refusals_total',
    help: 'Times spcd refused to stop, replace or remove a hypervisor while VMs run, by container and action.',
    labels: ['container', 'action'],
  });
  const failures = registry.counter({
    name: 'spcd_health_check_failures_total',
    help: 'Failed health check results counted (outside the start period), by container and check.',
    labels: ['container', 'check'],
  });
  d.events.subscribe((e) => {
    if (e.type === 'upgrade') upgrades.inc({ container: e.container, kind: e.kind, outcome: e.outcome });
    else if (e.type === 'vm-safety-refused') refusals.inc({ container: e.container, action: e.action });
  });
  d.health.onFailure((container, check) => failures.inc({ container, check }));
}
