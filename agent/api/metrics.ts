/** Prometheus text format: the API's own request metrics plus per-container gauges. */
import type { ContainerState, ContainerStatus, HealthState, SetStatus } from './types.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

interface Histogram {
  counts: number[]; // one per bucket, not cumulative
  sum: number;
  count: number;
}

export class ApiMetrics {
  private readonly requests = new Map<string, number>();
  private readonly latency = new Map<string, Histogram>();

  observe(route: string, method: string, status: number, seconds: number): void {
    const key = `${route}\u0000${method}\u0000${status}`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    let h = this.latency.get(route);
    if (!h) {
      h = { counts: BUCKETS.map(() => 0), sum: 0, count: 0 };
      this.latency.set(route, h);
    }
    const i = BUCKETS.findIndex((b) => seconds <= b);
    if (i >= 0) h.counts[i] = (h.counts[i] ?? 0) + 1;
    h.sum += seconds;
    h.count++;
  }

  render(): string {
    const out: string[] = [
      '# HELP spcd_api_requests_total API requests answered, by route, method and status.',
      '# TYPE spcd_api_requests_total counter',
    ];
    for (const [key, n] of this.requests) {
      const [route, method, status] = key.split('\u0000');
      out.push(
        `spcd_api_requests_total{route="${esc(route)}",method="${esc(method)}",status="${status}"} ${n}`,
      );
    }
    out.push(
      '# HELP spcd_api_request_duration_seconds Time to answer (to the first byte for streams), by route.',
      '# TYPE spcd_api_request_duration_seconds histogram',
    );
    for (const [route, h] of this.latency) {
      let cumulative = 0;
      const r = esc(route);
      BUCKETS.forEach((b, i) => {
        cumulative += h.counts[i] ?? 0;
        out.push(`spcd_api_request_duration_seconds_bucket{route="${r}",le="${b}"} ${cumulative}`);
      });
      out.push(`spcd_api_request_duration_seconds_bucket{route="${r}",le="+Inf"} ${h.count}`);
      out.push(`spcd_api_request_duration_seconds_sum{route="${r}"} ${h.sum}`);
      out.push(`spcd_api_request_duration_seconds_count{route="${r}"} ${h.count}`);
    }
    return out.join('\n') + '\n';
  }
}

const STATES: readonly ContainerState[] = [
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
const HEALTHS: readonly HealthState[] = ['healthy', 'unhealthy', 'starting', 'unknown', 'none'];

export function containerMetrics(sets: readonly SetStatus[]): string {
  const all: ContainerStatus[] = [];
  const walk = (list: readonly SetStatus[]): void => {
    for (const s of list) {
      all.push(...s.containers);
      walk(s.sets);
    }
  };
  walk(sets);
  const state: string[] = [];
  const gen: string[] = [];
  const restarts: string[] = [];
  const health: string[] = [];
  const census: string[] = [];
  for (const c of all) {
    const l = `container="${esc(c.name)}",set="${esc(c.set)}"`;
    for (const s of STATES) state.push(`spcd_container_state{${l},state="${s}"} ${c.state === s ? 1 : 0}`);
    gen.push(`spcd_container_generation{${l}} ${c.generation}`);
    restarts.push(`spcd_container_restarts_total{${l}} ${c.restartCount}`);
    for (const h of HEALTHS)
      health.push(`spcd_container_health{${l},health="${h}"} ${c.health === h ? 1 : 0}`);
    if (c.census) census.push(`spcd_domain_census_mismatches_total{${l}} ${c.census.mismatches}`);
  }
  return (
    [
      '# HELP spcd_container_state 1 for the state each container is in.',
      '# TYPE spcd_container_state gauge',
      ...state,
      '# HELP spcd_container_generation Current generation of each container (0: never created).',
      '# TYPE spcd_container_generation gauge',
      ...gen,
      '# HELP spcd_container_restarts_total Restarts spcd counted for each container.',
      '# TYPE spcd_container_restarts_total counter',
      ...restarts,
      '# HELP spcd_container_health 1 for the health each container reports.',
      '# TYPE spcd_container_health gauge',
      ...health,
      '# HELP spcd_domain_census_mismatches_total Domain census mismatches of each hypervisor container since spcd started.',
      '# TYPE spcd_domain_census_mismatches_total counter',
      ...census,
    ].join('\n') + '\n'
  );
}

function esc(v: string | undefined): string {
  return (v ?? '').replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
