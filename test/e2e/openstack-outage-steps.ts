/**
 * The outage step of the OpenStack end-to-end test (docs/explanation/openstack-proof.md,
 * "RabbitMQ outage"): RabbitMQ is stopped through spcd's API, as an operator
 * stops it for maintenance, stays down for a minute (longer, until every
 * client's dependency check reported it down), and is started again.
 * The AMQP checks of the services are dependency checks: spcd reports
 * RabbitMQ down on each of them and restarts nothing; oslo.messaging
 * reconnects by itself, and nova-compute reports `up` again after the start
 * (runStep checks it from `upSince`).
 */
import { waitFor } from '../support/wait.js';
import type { ContainerView } from './libvirt-e2e-harness.js';
import type { SpcdControl } from './openstack-actions.js';
import type { Acted } from './openstack-steps.js';

interface StatusSet {
  readonly containers: readonly ContainerView[];
  readonly sets: readonly StatusSet[];
}

/** Every container spcd shows: its engine id and start time (`at`), and whether it runs. */
export async function instances(c: SpcdControl): Promise<Map<string, { at: string; running: boolean }>> {
  const doc = await c.api().get<{ sets: StatusSet[] }>('/v1/status');
  const out = new Map<string, { at: string; running: boolean }>();
  const walk = (s: StatusSet): void => {
    for (const x of s.containers)
      out.set(x.name, { at: `${x.containerId ?? ''}@${x.startedAt ?? ''}`, running: x.state === 'running' });
    for (const sub of s.sets) walk(sub);
  };
  doc.sets.forEach(walk);
  return out;
}

/** One operator verb through the API, waited on until it succeeded. */
async function verb(c: SpcdControl, container: string, name: 'stop' | 'start'): Promise<void> {
  const before = await c.api().container(container);
  const op = await c
    .api()
    .post(`/v1/containers/${container}/${name}`, { expectedGeneration: before.generation });
  const fin = await c.tap().finished(op, 300_000);
  if (fin.phase !== 'succeeded')
    throw new Error(`${name} of ${container} failed: ${JSON.stringify(fin.error)}`);
}

export interface OutageResult extends Acted {
  /** Containers (other than RabbitMQ) whose engine id or start time changed during the outage. */
  readonly restarted: readonly string[];
}

/**
 * RabbitMQ (`rabbit`) down for `downMs`, then up. `dependents`: containers
 * whose AMQP dependency check must be reported down during the outage.
 */
export async function rabbitOutage(
  c: SpcdControl,
  rabbit: string,
  dependents: readonly string[],
  downMs = 60_000,
  seenWithinMs = 240_000,
): Promise<OutageResult> {
  const before = await instances(c);
  await verb(c, rabbit, 'stop');
  const stopAt = Date.now();
  const seen = new Set<string>();
  let seenDownS: number;
  try {
    // Kolla's check period (30 s, 3 failures in a row) reports a dependency down
    // about 90 s in: the outage lasts until every client reported it, a minute at least.
    await waitFor(
      `spcd to report RabbitMQ down on ${dependents.join(', ')}`,
      () => {
        for (const d of dependents)
          if (
            c
              .tap()
              .find(
                (e) => e.type === 'dependency' && e.container === d && e.status === 'down' && e.at >= stopAt,
              )
          )
            seen.add(d);
        return seen.size === dependents.length;
      },
      { timeoutMs: seenWithinMs, intervalMs: 500 },
    );
    seenDownS = (Date.now() - stopAt) / 1000;
    await new Promise((res) => setTimeout(res, Math.max(0, stopAt + downMs - Date.now())));
  } finally {
    // Whatever the checks said, RabbitMQ comes back: the steps after need it.
    await verb(c, rabbit, 'start');
  }
  const upSince = Date.now();
  await waitFor(
    `spcd to report RabbitMQ up again on ${dependents.join(', ')}`,
    () =>
      dependents.every((d) =>
        c
          .tap()
          .find((e) => e.type === 'dependency' && e.container === d && e.status === 'up' && e.at >= upSince),
      ),
    { timeoutMs: 300_000, intervalMs: 500 },
  );
  const after = await instances(c);
  const restarted = [...after].filter(([n, v]) => n !== rabbit && before.get(n)?.at !== v.at).map(([n]) => n);
  return {
    // The step's stop -> nova-compute up window counts from RabbitMQ's start:
    // before it nova-compute cannot report (rabbit_down_s says how long).
    stopAt: upSince,
    upSince,
    libvirtStopped: false,
    restarted,
    spcd: `rabbit_down_s=${((upSince - stopAt) / 1000).toFixed(1)} dependency_down_seen_after_s=${seenDownS.toFixed(1)} dependency_up_after_start_s=${((Date.now() - upSince) / 1000).toFixed(1)} restarted=${restarted.join(',') || 'none'}`,
  };
}
