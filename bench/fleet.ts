/**
 * bench:fleet — 1,000 simulated nodes (in-process) roll an upgrade through N
 * Lease slots on the in-test API server, each through the real
 * @kubernetes/client-node. Each node's local upgrade takes W ms (simulated).
 * Prints total rollout time against the ideal ceil(nodes/N) x W.
 *
 *   npm run bench:fleet -- [--nodes 1000] [--slots 10] [--window 30] [--retry 5000] [--lease 15]
 *     [--spread 100] [--jitter 2500] [--rollout 1]
 *
 * --rollout 1: each node runs the whole rollout (RolloutRunner over the
 * Kubernetes backend: the desired ConfigMap watched, phase Leases written, the
 * ledger read before and under the slot); requests_per_node then counts every
 * request (ConfigMaps and all Leases), not only the slot Leases.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { KubeClient } from '../agent/kube/client.js';
import { FleetSlots } from '../agent/kube/fleet-slots.js';
import { runFleetUpgrade } from '../agent/kube/fleet-upgrade.js';
import { KubeRolloutBackend } from '../agent/kube/rollout-backend.js';
import { RolloutRunner } from '../agent/rollout/runner.js';
import { silentLogger } from '../agent/log.js';
import { systemClock } from '../agent/model/clock.js';
import { FakeKubeServer } from '../test/support/kube-server.js';
import { positiveArg as arg } from './support/args.js';

const nodes = arg('nodes', 1000);
const N = arg('slots', 10);
const W = arg('window', 50);
const retryMs = arg('retry', 5000);
const lease = arg('lease', 15);
const spread = arg('spread', 100);
const startJitter = arg('jitter', 2500);
const rollout = process.argv.includes('--rollout') || process.env.FLEET_ROLLOUT === '1';

const server = new FakeKubeServer();
await server.start();
const api = new KubeClient(server.kubeConfig('spcd-system').kc, { callTimeoutMs: 30_000 });
const log = silentLogger();

let t0 = performance.now();
let inFlight = 0;
let maxConcurrent = 0;
let done = 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Per slot: when its last holder finished; the gaps between a finish and the next start are the hand-over cost. */
const lastEnd = new Map<string, number>();
const gaps: number[] = [];
/** Per slot: upgrades run, first start, last end (ms from t0): where the slot-time goes. */
const perSlot = new Map<string, { runs: number; first: number; last: number }>();
const localUpgrade = async (slot = ''): Promise<void> => {
  const start = performance.now();
  // --rollout runs the upgrade without telling which slot: no gap there.
  const prev = slot ? lastEnd.get(slot) : undefined;
  if (prev !== undefined) gaps.push(start - prev);

  inFlight++;
  maxConcurrent = Math.max(maxConcurrent, inFlight);
  await sleep(W);
  inFlight--;
  done++;
  const end = performance.now();
  lastEnd.set(slot, end);
  const s = perSlot.get(slot) ?? { runs: 0, first: start - t0, last: 0 };
  s.runs++;
  s.last = end - t0;
  perSlot.set(slot, s);
};

/**
 * --rollout: every node's spcd is already running (following the ConfigMap,
 * its phase read) when the operator publishes the rollout at t0, as in a
 * real fleet; what is measured is the rollout, not 1,000 daemons starting.
 */
async function startFleet(): Promise<{ runners: RolloutRunner[]; upgraded: Promise<void>[] }> {
  const runners: RolloutRunner[] = [];
  const upgraded: Promise<void>[] = [];
  for (let i = 0; i < nodes; i++) {
    const holder = `compute-${i}`;
    let applied = false;
    let resolve!: () => void;
    upgraded.push(new Promise<void>((r) => (resolve = r)));
    const runner = new RolloutRunner({
      node: holder,
      backend: new KubeRolloutBackend({
        api,
        namespace: 'spcd-system',
        node: holder,
        configMap: 'spcd-desired',
        leaseDurationSeconds: lease,
        clock: systemClock,
        log,
        startJitterMs: startJitter,
      }),
      actions: {
        pending: (d) => !applied && Object.keys(d.images).length > 0,
        prePull: async () => undefined,
        apply: async () => {
          await localUpgrade();
          applied = true;
          resolve();
        },
        health: () => 'healthy',
      },
      clock: systemClock,
      log,
      defaultMaxConcurrent: N,
    });
    runners.push(runner);
  }
  await Promise.all(runners.map((r) => r.start()));
  await Promise.all(runners.map((r) => r.current));
  return { runners, upgraded };
}

const fleet = rollout ? await startFleet() : undefined;
const callsBefore = server.calls.length;
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
t0 = performance.now();
const cpu0 = process.cpuUsage();
if (fleet) {
  server.put('configmaps', 'spcd-system', {
    metadata: { name: 'spcd-desired' },
    data: {
      images: 'nova_compute: nova:30\n',
      rollout: `id: bench\nmaxConcurrent: ${N}\nfailureBudget: { maxFailed: 10 }\n`,
    },
  });
  await Promise.all(fleet.upgraded);
} else
  await Promise.all(
    Array.from({ length: nodes }, async (_, i) => {
      const slots = new FleetSlots(
        { api, namespace: 'spcd-system', holder: `compute-${i}`, clock: systemClock, log },
        { slots: N, leaseDurationSeconds: lease },
      );
      await runFleetUpgrade(slots, (h) => localUpgrade(h.name), {
        clock: systemClock,
        log,
        retryMs,
        wakeSpreadMs: spread,
        startJitterMs: startJitter,
      });
    }),
  );
const total = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
loopDelay.disable();
if (fleet) await Promise.all(fleet.runners.map((r) => r.stop()));
api.close();
await server.stop();

const ideal = Math.ceil(nodes / N) * W;
const measured = server.calls.slice(callsBefore);
const leaseCalls = measured.filter((c) => c.resource === 'leases');
const conflicts = leaseCalls.filter((c) => c.status === 409).length;
console.log(
  `${rollout ? 'rollout=1 ' : ''}nodes=${nodes} upgraded=${done} N=${N} window_ms=${W} retry_ms=${retryMs} lease_s=${lease} spread_ms=${spread} jitter_ms=${startJitter}`,
);
console.log(`total_ms=${total.toFixed(0)} ideal_ms=${ideal} (ceil(${nodes}/${N}) x ${W})`);
const perNode = ((rollout ? measured.length : leaseCalls.length) / nodes).toFixed(1);
const byVerb = (v: string) => leaseCalls.filter((c) => c.verb === v).length;
console.log(
  `lease_requests=${leaseCalls.length} conflicts_409=${conflicts} list=${byVerb('list')} watch=${byVerb('watch')} create=${byVerb('create')} update=${byVerb('update')} patch=${byVerb('patch')} get=${byVerb('get')}`,
);
if (rollout) {
  // where the requests go: slot Leases (a list is a slot pass), the ledger, phase Lease updates, creates, the ConfigMap
  const kind = (c: (typeof measured)[number]): string =>
    c.resource === 'configmaps'
      ? 'configmap'
      : c.name === 'spcd-rollout'
        ? 'ledger'
        : c.name?.startsWith('spcd-node-')
          ? 'phase'
          : c.verb === 'create'
            ? 'create' // a POST names no object: slot or phase Lease
            : 'slot';
  const by = new Map<string, number>();
  for (const c of measured) by.set(kind(c), (by.get(kind(c)) ?? 0) + 1);
  console.log([...by].map(([k, v]) => `${k}=${v}`).join(' '));
}
// One process holds the server and every node: CPU near total_ms means the rollout is CPU-bound here.
console.log(
  `process_cpu_ms=${((cpu.user + cpu.system) / 1000).toFixed(0)} (${((cpu.user + cpu.system) / 10 / total).toFixed(0)}% of one core over total_ms)`,
);
console.log(
  `event_loop_delay_ms p50=${(loopDelay.percentile(50) / 1e6).toFixed(1)} p99=${(loopDelay.percentile(99) / 1e6).toFixed(1)} max=${(loopDelay.max / 1e6).toFixed(1)}`,
);
if (gaps.length > 0) {
  gaps.sort((a, b) => a - b);
  const q = (f: number) => gaps[Math.min(gaps.length - 1, Math.floor(f * gaps.length))]!.toFixed(0);
  const sum = gaps.reduce((a, b) => a + b, 0);
  console.log(
    `handover_gap_ms p50=${q(0.5)} p90=${q(0.9)} p99=${q(0.99)} max=${q(1)} mean=${(sum / gaps.length).toFixed(1)} (a slot's finish to its next start)`,
  );
}
if (perSlot.size > 0 && !rollout) {
  // Slot-time accounting: N x total = upgrades + hand-over gaps + idle before the first and after the last upgrade.
  const ss = [...perSlot.values()];
  const runs = ss.map((s) => s.runs);
  const firsts = ss.map((s) => s.first).sort((a, b) => a - b);
  const tail = ss.reduce((a, s) => a + (total - s.last), 0);
  const head = firsts.reduce((a, f) => a + f, 0);
  const gapSum = gaps.reduce((a, b) => a + b, 0);
  console.log(
    `slot_time_ms total=${(N * total).toFixed(0)} upgrades=${done * W} gaps=${gapSum.toFixed(0)} before_first=${head.toFixed(0)} after_last=${tail.toFixed(0)}; first_start=${firsts[0]!.toFixed(0)} all_busy=${firsts[firsts.length - 1]!.toFixed(0)} runs_per_slot=${Math.min(...runs)}-${Math.max(...runs)}`,
  );
}
if (done !== nodes || maxConcurrent > N) process.exitCode = 1;
console.log(
  `fleet_rollout_ratio=${(total / ideal).toFixed(2)} max_concurrent=${maxConcurrent} N=${N} requests_per_node=${perNode}`,
);
