/**
 * bench:fleet — 1,000 simulated nodes (in-process) roll an upgrade through N
 * Lease slots on the in-test API server, each through the real
 * @kubernetes/client-node. Each node's local upgrade takes W ms (simulated).
 * Prints total rollout time against the ideal ceil(nodes/N) x W.
 *
 *   npm run bench:fleet -- [--nodes 1000] [--slots 10] [--window 30] [--retry 5000] [--lease 15]
 *     [--spread 100] [--jitter 1000]
 */
import { KubeClient } from '../agent/kube/client.js';
import { FleetSlots } from '../agent/kube/fleet-slots.js';
import { runFleetUpgrade } from '../agent/kube/fleet-upgrade.js';
import { silentLogger } from '../agent/log.js';
import { systemClock } from '../agent/model/clock.js';
import { FakeKubeServer } from '../test/support/kube-server.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : Number(process.env[`FLEET_${name.toUpperCase()}`] ?? def);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
}

const nodes = arg('nodes', 1000);
const N = arg('slots', 10);
const W = arg('window', 50);
const retryMs = arg('retry', 5000);
const lease = arg('lease', 15);
const spread = arg('spread', 100);
const startJitter = arg('jitter', 1000);

const server = new FakeKubeServer();
await server.start();
const api = new KubeClient(server.kubeConfig('spcd-system').kc, { callTimeoutMs: 30_000 });
const log = silentLogger();

let inFlight = 0;
let maxConcurrent = 0;
let done = 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const t0 = performance.now();
await Promise.all(
  Array.from({ length: nodes }, async (_, i) => {
    const slots = new FleetSlots(
      { api, namespace: 'spcd-system', holder: `compute-${i}`, clock: systemClock, log },
      { slots: N, leaseDurationSeconds: lease },
    );
    await runFleetUpgrade(
      slots,
      async () => {
        inFlight++;
        maxConcurrent = Math.max(maxConcurrent, inFlight);
        await sleep(W);
        inFlight--;
        done++;
      },
      { clock: systemClock, log, retryMs, wakeSpreadMs: spread, startJitterMs: startJitter },
    );
  }),
);
const total = performance.now() - t0;
api.close();
await server.stop();

const ideal = Math.ceil(nodes / N) * W;
const leaseCalls = server.calls.filter((c) => c.resource === 'leases');
const conflicts = leaseCalls.filter((c) => c.status === 409).length;
console.log(
  `nodes=${nodes} upgraded=${done} N=${N} window_ms=${W} retry_ms=${retryMs} lease_s=${lease} spread_ms=${spread} jitter_ms=${startJitter}`,
);
console.log(`total_ms=${total.toFixed(0)} ideal_ms=${ideal} (ceil(${nodes}/${N}) x ${W})`);
const perNode = (leaseCalls.length / nodes).toFixed(1);
const byVerb = (v: string) => leaseCalls.filter((c) => c.verb === v).length;
console.log(
  `lease_requests=${leaseCalls.length} conflicts_409=${conflicts} list=${byVerb('list')} watch=${byVerb('watch')} create=${byVerb('create')} update=${byVerb('update')}`,
);
if (done !== nodes || maxConcurrent > N) process.exitCode = 1;
console.log(
  `fleet_rollout_ratio=${(total / ideal).toFixed(2)} max_concurrent=${maxConcurrent} N=${N} requests_per_node=${perNode}`,
);
