/**
 * bench:fleet-etcd — the fleet rollout of bench:fleet, through a real
 * 3-member etcd cluster on loopback ports (Debian's etcd-server, data in
 * /dev/shm when there is one) instead of the in-test Kubernetes API server.
 * Every simulated node runs the whole rollout (RolloutRunner over the etcd
 * backend: the desired key watched, its phase key written, a place in the
 * slot queue), in one process; the local upgrade takes W ms.
 * Nodes share `--clients` etcd clients (round robin): 1,000 clients of 3
 * gRPC channels each would measure this machine's sockets, not the rollout.
 * Requests are counted by the members themselves (their /metrics): unary
 * calls plus the messages nodes send on streams (watch requests, lease
 * keep-alives), since t0.
 *
 *   npm run bench:fleet-etcd -- [--nodes 1000] [--slots 10] [--window 50] [--clients 50] [--ttl 60]
 */
import type { Etcd3 } from 'etcd3';
import { existsSync } from 'node:fs';
import { SLOT_TTL_SECONDS } from '../agent/daemon/etcd-wiring.js';
import { connectEtcd } from '../agent/etcd/client.js';
import { EtcdCluster } from '../test/support/etcd-cluster.js';
import { EtcdFleet } from '../test/support/etcd-fleet.js';
import { positiveArg as arg } from './support/args.js';

const nodes = arg('nodes', 1000);
const N = arg('slots', 10);
const W = arg('window', 50);
const clients = arg('clients', 50);
// the daemon's lease TTL: each node renews its lease every third of it, whatever it is doing
const ttl = arg('ttl', SLOT_TTL_SECONDS);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** When each simulated upgrade began and ended (performance.now()). */
const starts: number[] = [];
const ends: number[] = [];
async function upgrade(): Promise<void> {
  starts.push(performance.now());
  await sleep(W);
  ends.push(performance.now());
}

const cluster = await EtcdCluster.start(3, existsSync('/dev/shm') ? { parentDir: '/dev/shm' } : {});
const pool: Etcd3[] = Array.from({ length: clients }, () =>
  connectEtcd({ endpoints: cluster.endpoints(), callTimeoutMs: 30_000 }),
);
const fleet = new EtcdFleet({
  endpoints: cluster.endpoints(),
  prefix: '/bench/',
  apply: upgrade,
  slotTtlSeconds: ttl,
  callTimeoutMs: 30_000,
  recheckMs: 5_000,
  defaultMaxConcurrent: N,
  clientPool: pool,
});
let exitCode = 0;
try {
  for (let i = 0; i < nodes; i++) await fleet.add(`compute-${i}`);
  // every node has seen the (absent) desired key and reported itself up to date before t0
  for (;;) {
    if ((await fleet.phases()).size === nodes) break;
    await sleep(100);
  }
  const before = await cluster.metrics();
  const cpu0 = cluster.cpuSeconds();
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  await fleet.publish(`images: { nova_compute: "nova:30" }\nrollout: { id: bench, maxConcurrent: ${N} }\n`);
  while (fleet.applied.length < nodes) await sleep(5);
  const total = performance.now() - t0;
  const after = await cluster.metrics();
  const cpu = cluster.cpuSeconds().map((c, i) => (c - cpu0[i]!).toFixed(1));
  const own = process.cpuUsage(own0);
  const delta = (k: string): number => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const unary = delta('grpc_server_handled_total/unary');
  const streamed = delta('grpc_server_msg_received_total/bidi_stream');
  const ideal = Math.ceil(nodes / N) * W;
  console.log(
    `etcd members=3 nodes=${nodes} upgraded=${fleet.applied.length} N=${N} window_ms=${W} clients=${clients} ttl_s=${ttl}`,
  );
  console.log(`total_ms=${total.toFixed(0)} ideal_ms=${ideal} (ceil(${nodes}/${N}) x ${W})`);
  const byMethod = (k: string): string =>
    [...after.keys()]
      .filter((m) => m.startsWith(`${k}/`) && delta(m) > 0)
      .map((m) => `${m.slice(k.length + 1)}=${delta(m)}`)
      .join(' ');
  console.log(`unary_requests=${unary} stream_messages=${streamed}`);
  console.log(
    `by_method ${byMethod('grpc_server_handled_total/unary')} ${byMethod('grpc_server_msg_received_total/bidi_stream')}`,
  );
  console.log(
    `cpu_s members=${cpu.join(',')} nodes_process=${((own.user + own.system) / 1e6).toFixed(1)} (during the rollout)`,
  );
  // The k-th start needs the (k-N)-th finish (N slots): the gap between them is the hand-over.
  const gaps = starts.slice(N).map((s, k) => s - ends[k]!);
  console.log(
    'starts_per_second',
    Array.from(
      { length: Math.ceil(total / 1000) },
      (_, i) => starts.filter((x) => x - t0 >= i * 1000 && x - t0 < (i + 1) * 1000).length,
    ).join(' '),
  );
  gaps.sort((a, b) => a - b);
  const q = (f: number) => (gaps[Math.min(gaps.length - 1, Math.floor(f * gaps.length))] ?? 0).toFixed(0);
  console.log(
    `first_${N}_started_ms=${((starts[N - 1] ?? t0) - t0).toFixed(0)} handover_gap_ms p50=${q(0.5)} p90=${q(0.9)} p99=${q(0.99)} max=${q(1)} (the k-th start after the (k-N)-th finish)`,
  );
  if (fleet.applied.length !== nodes || fleet.maxInFlight > N) exitCode = 1;
  console.log(
    `etcd fleet_rollout_ratio=${(total / ideal).toFixed(2)} max_concurrent=${fleet.maxInFlight} N=${N} requests_per_node=${((unary + streamed) / nodes).toFixed(1)}`,
  );
} finally {
  await fleet.stop();
  for (const c of pool) c.close();
  await cluster.stop();
}
process.exit(exitCode);
