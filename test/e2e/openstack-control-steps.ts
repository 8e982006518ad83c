/**
 * The control restarts and the compute-set upgrade of the OpenStack
 * end-to-end test (issue #15 part 3, docs/explanation/openstack-proof.md "Control restarts
 * and the compute-set upgrade"), all through spcd's API:
 * - a restart of each control container (every container of the control and
 *   network sets, read from their files), each waited on until spcd reports
 *   it healthy again with a check result after the stop;
 * - a set upgrade of the whole compute set, every member to its current image
 *   plus one label (scripts/openstack/build-next-image.sh).
 * Each returns what runStep (openstack-steps.ts) needs: the stop's time and
 * spcd's own figures.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { REPO } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';
import { kv, run, type ContainerView } from './libvirt-e2e-harness.js';
import type { SpcdActions, SpcdControl } from './openstack-actions.js';
import type { OpenStack } from './openstack-client.js';
import { COMPUTE_SET, CONTROL_SET, NETWORK_SET } from './openstack-e2e-harness.js';
import type { Acted } from './openstack-steps.js';

/** The container-name prefix of the set files (renderSetFile replaces it). */
export const TEMPLATE_PREFIX = 'spcd_e2e_os_';

interface SetDoc {
  readonly set?: string;
  readonly containers?: Record<string, unknown>;
  readonly sets?: Record<string, SetDoc>;
}

/** A set file's set name and its containers (nested sets included) in file order, without the template prefix. */
export function setMembers(file: string): { set: string; containers: string[] } {
  const doc = yaml.load(readFileSync(file, 'utf8')) as SetDoc;
  if (!doc?.set) throw new Error(`${file}: no "set" name`);
  const containers: string[] = [];
  const walk = (s: SetDoc): void => {
    for (const name of Object.keys(s.containers ?? {}))
      containers.push(name.startsWith(TEMPLATE_PREFIX) ? name.slice(TEMPLATE_PREFIX.length) : name);
    for (const sub of Object.values(s.sets ?? {})) walk(sub);
  };
  walk(doc);
  return { set: doc.set, containers };
}

/**
 * Step 8's containers (every container of the control and network sets; none
 * when the control plane is external) and step 9's set (the compute set).
 */
export function stepMembers(externalControl: boolean): {
  control: string[];
  compute: { set: string; containers: string[] };
} {
  const control = externalControl ? [] : [CONTROL_SET, NETWORK_SET].flatMap((f) => setMembers(f).containers);
  return { control, compute: setMembers(COMPUTE_SET) };
}

interface HealthView {
  readonly status: string;
  readonly checks: readonly { name: string; history: readonly { at: string; ok: boolean }[] }[];
}

interface StatusSet {
  readonly containers: readonly ContainerView[];
  readonly sets: readonly StatusSet[];
}

/** Every container spcd shows, with the time it started. */
async function starts(c: SpcdControl): Promise<Map<string, string | null>> {
  const doc = await c.api().get<{ sets: StatusSet[] }>('/v1/status');
  const out = new Map<string, string | null>();
  const walk = (s: StatusSet): void => {
    for (const x of s.containers) out.set(x.name, x.startedAt);
    for (const sub of s.sets) walk(sub);
  };
  doc.sets.forEach(walk);
  return out;
}

/** The containers other than `except` that started again between two snapshots (spcd healed them). */
function restartedOthers(
  before: Map<string, string | null>,
  after: Map<string, string | null>,
  except: string,
): string[] {
  return [...after].filter(([n, t]) => n !== except && before.has(n) && before.get(n) !== t).map(([n]) => n);
}

/**
 * Restarts `container` through spcd's API (POST .../restart) and waits until
 * spcd reports it healthy: status `healthy` and a passing result of every
 * check after the stop (a container without checks never is: every control
 * container has one, test/unit/openstack-control-steps.test.ts); then
 * `settle`, when given, until it succeeds. Its figures: spcd's stop -> running, stop -> the last
 * check's first pass, and any other container spcd restarted meanwhile.
 */
export async function restartHealthy(
  c: SpcdControl,
  actions: SpcdActions,
  container: string,
  settle?: Settle,
  timeoutMs = 600_000,
): Promise<Acted> {
  const before = await starts(c);
  const a = await actions.restart(container);
  const healthyAt = await waitFor(
    `${container} healthy in spcd after its restart`,
    async () => {
      // No checks yet: spcd dropped the old start's watch and watches the new one at its next pass.
      const h = await c.api().get<HealthView>(`/v1/containers/${container}/health`);
      if (h.status !== 'healthy' || h.checks.length === 0) return undefined;
      const firstPass = h.checks.map((ch) =>
        Math.min(
          ...ch.history.filter((r) => r.ok && Date.parse(r.at) > a.stopAt).map((r) => Date.parse(r.at)),
        ),
      );
      return firstPass.every(Number.isFinite) && Math.max(...firstPass);
    },
    { timeoutMs, intervalMs: 250 },
  );
  // What the service's clients need once it is healthy (retried until it answers).
  let settled = '';
  if (settle) {
    await waitFor(settle.what, () => settle.probe().then(() => true), { timeoutMs, intervalMs: 1000 });
    settled = ` stop_to_${settle.what.replace(/\W+/g, '_')}_s=${((Date.now() - a.stopAt) / 1000).toFixed(2)}`;
  }
  const others = restartedOthers(before, await starts(c), container);
  return {
    ...a,
    spcd: `${a.spcd} stop_to_healthy_s=${((healthyAt - a.stopAt) / 1000).toFixed(2)}${settled} others_restarted=${others.join(',') || 'none'}`,
  };
}

export interface Settle {
  readonly what: string;
  readonly probe: () => Promise<unknown>;
}

/**
 * What a control service's clients need after its restart, beyond spcd's
 * "healthy": Neutron 21 answers every port list (Nova's server views too)
 * with a 500 after its start until a network list has configured its
 * mappers (docs/explanation/openstack-proof.md), so the test lists networks once, as at
 * bring-up.
 */
export function settleFor(service: string, os: OpenStack): Settle | undefined {
  return service === 'neutron_server'
    ? { what: 'neutron lists networks', probe: () => os.warmNeutron() }
    : undefined;
}

/** Step 8 for one control container: restartHealthy, then what its service needs (settleFor). */
export function restartControl(
  c: SpcdControl,
  actions: SpcdActions,
  os: OpenStack,
  container: string,
  service: string,
): Promise<Acted> {
  return restartHealthy(c, actions, container, settleFor(service, os));
}

/** `repo:tag` -> `repo:tag-<suffix>`, built from it with one more label (cached by Docker: about a second). */
export async function labelledImage(base: string, suffix: string): Promise<string> {
  const colon = base.lastIndexOf(':');
  if (colon < 0 || base.includes('@')) throw new Error(`${base}: not a repo:tag reference`);
  const next = `${base}-${suffix}`;
  const out = await run(
    'bash',
    [join(REPO, 'scripts/openstack/build-next-image.sh'), base, next, suffix],
    10 * 60_000,
  );
  const got = kv(out.stdout.trim().split('\n').at(-1) ?? '');
  if (got['image'] !== next) throw new Error(`build-next-image.sh ${base} ${next}: ${out.stdout}`);
  return next;
}

/** Each container's target for a set upgrade: its running image plus one label. */
export async function setTargets(
  c: SpcdControl,
  containers: readonly string[],
  suffix: string,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of containers)
    out[name] = await labelledImage((await c.api().container(name)).image, suffix);
  return out;
}

/**
 * A set upgrade through spcd's API (POST /v1/sets/SET/upgrade with every
 * member's image): spcd upgrades them one by one in depends_on order, each
 * its own health-gated transaction. Checks each member runs its target at
 * a later generation; the figures are each member's stop -> running and
 * stop -> healthy (its upgrade-step events), in the order spcd went. The
 * step's stop is the first member's; nova-compute's heartbeat is awaited
 * after the last member's (upSince).
 */
export async function upgradeSet(
  c: SpcdControl,
  set: string,
  images: Readonly<Record<string, string>>,
  timeoutMs = 1_800_000,
): Promise<Acted> {
  const before = new Map<string, ContainerView>();
  for (const name of Object.keys(images)) before.set(name, await c.api().container(name));
  const op = await c.api().post(`/v1/sets/${encodeURIComponent(set)}/upgrade`, { images });
  const fin = await c.tap().finished(op, timeoutMs);
  if (fin.phase !== 'succeeded')
    throw new Error(`set upgrade of ${set} failed: ${JSON.stringify(fin.error)}`);
  const at = (name: string, step: string, outcome: string): number | undefined =>
    c
      .tap()
      .find(
        (e) =>
          e.type === 'upgrade-step' &&
          e.operationId === op &&
          e.container === name &&
          e.step === step &&
          e.outcome === outcome,
      )?.at;
  const figures: { stop: number; line: string }[] = [];
  const wrong: string[] = [];
  for (const [name, image] of Object.entries(images)) {
    const was = before.get(name)!;
    const now = await c.api().container(name);
    // A later generation (not always the next: a rolled-back attempt used one up).
    if (now.image !== image || now.generation <= was.generation)
      wrong.push(
        `${name}: ${now.image} generation ${now.generation}, wanted ${image} after ${was.generation}`,
      );
    const stop = at(name, 'stop-old', 'begin');
    const running = at(name, 'start-new', 'done');
    const healthy = at(name, 'health-gate', 'done');
    if (stop === undefined || running === undefined || healthy === undefined) {
      wrong.push(`${name}: no stop-old, start-new or health-gate event in operation ${op}`);
      continue;
    }
    const s = (t: number): string => ((t - stop) / 1000).toFixed(2);
    figures.push({
      stop,
      line: `${name.slice(name.indexOf('_') + 1)}:${was.image}->${image} stop_to_running_s=${s(running)} stop_to_healthy_s=${s(healthy)}`,
    });
  }
  if (wrong.length) throw new Error(`set upgrade of ${set}: ${wrong.join('; ')}`);
  figures.sort((a, b) => a.stop - b.stop);
  const census = c.tap().find((e) => e.type === 'census' && e.operationId === op);
  const total = ((fin.at - figures[0]!.stop) / 1000).toFixed(2);
  return {
    stopAt: figures[0]!.stop,
    // nova-compute's heartbeat must come after the whole set changed, not only after the first stop.
    upSince: figures.at(-1)!.stop,
    libvirtStopped: Object.keys(images).includes(c.libvirt()),
    spcd: `set=${set} first_stop_to_done_s=${total} ${figures.map((f) => f.line).join(' ')}${census ? ` census=${census.outcome}:${census.detail}` : ''}`,
  };
}
