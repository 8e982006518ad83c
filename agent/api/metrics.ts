/** The API room's families: its own requests, and the per-container gauges read from the status. */
import type { MetricsRegistry, Sample } from './registry.js';
import type { ContainerState, ContainerStatus, HealthState, SetStatus, StatusView } from './types.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Counts and times the API's answers. */
export class ApiMetrics {
  private readonly requests;
  private readonly latency;

  constructor(registry: MetricsRegistry) {
    this.requests = registry.counter({
      name: 'spcd_api_requests_total',
      help: 'API requests answered, by route, method and status.',
      labels: ['route', 'method', 'status'],
    });
    this.latency = registry.histogram({
      name: 'spcd_api_request_duration_seconds',
      help: 'Time to answer (to the first byte for streams), by route.',
      labels: ['route'],
      buckets: BUCKETS,
    });
  }

  observe(route: string, method: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, status: String(status) });
    this.latency.observe({ route }, seconds);
  }
}

export const CONTAINER_STATES: readonly ContainerState[] = [
  'running',
  'starting',
  'stopped',
  'exited',
  'crash-looping',
  'failed',
  'missing',
  'upgrading',
  'quarantined',
  'unknown',
];
export const HEALTH_STATES: readonly HealthState[] = ['healthy', 'unhealthy', 'starting', 'unknown', 'none'];

/** Every container the status shows: the defined ones and those retained without a definition. */
export function allContainers(status: Pick<StatusView, 'sets' | 'retained'>): ContainerStatus[] {
  const all: ContainerStatus[] = [];
  const walk = (list: readonly SetStatus[]): void => {
    for (const s of list) {
      all.push(...s.containers);
      walk(s.sets);
    }
  };
  walk(status.sets());
  all.push(...(status.retained?.() ?? []));
  return all;
}

/** Per-container families, read from the status at each scrape. */
export function registerContainerMetrics(registry: MetricsRegistry, status: StatusView): void {
  const each =
    (f: (c: ContainerStatus, base: { container: string; set: string }) => Sample[]) => (): Sample[] =>
      allContainers(status).flatMap((c) => f(c, { container: c.name, set: c.set }));
  registry.collect(
    'gauge',
    {
      name: 'spcd_container_state',
      help: '1 for the state each container is in, 0 for the others.',
      labels: ['container', 'set', 'state'],
    },
    each((c, base) =>
      CONTAINER_STATES.map((s) => ({ labels: { ...base, state: s }, value: +(c.state === s) })),
    ),
  );
  registry.collect(
    'gauge',
    {
      name: 'spcd_container_generation',
      help: 'Current generation of each container (0: never created).',
      labels: ['container', 'set'],
    },
    each((c, base) => [{ labels: base, value: c.generation }]),
  );
  registry.collect(
    'counter',
    {
      name: 'spcd_container_restarts_total',
      help: 'Restarts spcd made of each container (after an exit or a failed health check).',
      labels: ['container', 'set'],
    },
    each((c, base) => [{ labels: base, value: c.restartCount }]),
  );
  registry.collect(
    'gauge',
    {
      name: 'spcd_container_health',
      help: '1 for the health each container reports, 0 for the others.',
      labels: ['container', 'set', 'health'],
    },
    each((c, base) =>
      HEALTH_STATES.map((h) => ({ labels: { ...base, health: h }, value: +(c.health === h) })),
    ),
  );
  registry.collect(
    'counter',
    {
      name: 'spcd_domain_census_mismatches_total',
      help: 'Domain census mismatches of each hypervisor container since spcd started.',
      labels: ['container', 'set'],
    },
    each((c, base) => (c.census ? [{ labels: base, value: c.census.mismatches }] : [])),
  );
}
