/**
 * `npm run bench:api`.
 * Phase 1: autocannon over the unix socket against GET /v1/status, the API
 * served by a child process (so the load generator does not share its event
 * loop) with a StatusView holding 200 demo containers: p50/p99 latency, rps.
 * Phase 2 (bench/api-daemon.ts): the real daemon with 200 real containers:
 * RSS, idle CPU over 30 s, adoption time after a restart, restarts caused.
 * The last line is the contract:
 *   status_p99_ms=<n> rps=<n> rss_mb=<n> idle_cpu_pct=<n> adopt_s=<n> adopt_restarts=<n>
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApiHandler } from '../agent/api/handler.js';
import { listenUnix } from '../agent/api/socket.js';
import { DaemonStatus } from '../agent/daemon/status-view.js';
import { silentLogger } from '../agent/log.js';
import { demoSets, FakeActions, FakeStatus } from '../test/support/api-fakes.js';
import { benchDaemon, type DaemonFigures } from './api-daemon.js';

interface AutocannonResult {
  latency: { p50: number; p99: number; average: number; max: number };
  requests: { average: number; total: number };
  errors: number;
  non2xx: number;
  throughput: { average: number };
}
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

const CONTAINERS = Number(process.env.BENCH_API_CONTAINERS ?? 200);

/** The child: serve the API on the socket it is told, answer "ready". */
async function serve(socketPath: string, revision: boolean): Promise<void> {
  const status = new FakeStatus(demoSets(CONTAINERS), { revision });
  const handler = createApiHandler({
    status,
    actions: new FakeActions(status),
    log: silentLogger(),
    version: 'bench',
  });
  const server = await listenUnix(handler, { socketPath, limits: { maxConnections: 256 } });
  process.send?.('ready');
  process.on('message', (m) => {
    if (m === 'stop') void server.close().then(() => process.exit(0));
  });
}

async function phase1(revision: boolean): Promise<{ p50: number; p99: number; rps: number }> {
  const require = createRequire(import.meta.url);
  const autocannon = require('autocannon') as Autocannon;
  const dir = mkdtempSync(join(tmpdir(), 'spcd-bench-api-'));
  const socketPath = join(dir, 'api.sock');
  const child = fork(fileURLToPath(import.meta.url), ['serve', socketPath, revision ? '1' : '0'], {
    stdio: 'inherit',
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`API server exited ${code}`)));
    });
    const run = (duration: number): Promise<AutocannonResult> =>
      autocannon({
        url: 'http://localhost/v1/status',
        socketPath,
        connections: Number(process.env.BENCH_API_CONNECTIONS ?? 10),
        pipelining: 1,
        duration,
      });
    await run(2); // warm-up: JIT, connection setup
    const r = await run(Number(process.env.BENCH_API_SECONDS ?? 10));
    const bodyKb = r.requests.total > 0 ? r.throughput.average / r.requests.average / 1024 : NaN;
    console.log(
      `phase 1 (${revision ? 'with' : 'without'} StatusView.revision): GET /v1/status with ${CONTAINERS} containers (~${bodyKb.toFixed(0)} KiB per answer): ` +
        `p50=${r.latency.p50} ms p99=${r.latency.p99} ms avg=${r.latency.average} ms max=${r.latency.max} ms ` +
        `rps=${r.requests.average} total=${r.requests.total} errors=${r.errors} non2xx=${r.non2xx}`,
    );
    return { p50: r.latency.p50, p99: r.latency.p99, rps: r.requests.average };
  } finally {
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === 'serve') {
    await serve(process.argv[3] as string, process.argv[4] === '1');
    return;
  }
  // Measure both ways; the contract line reports the way the shipped daemon serves.
  const daemonHasRevision = typeof (DaemonStatus.prototype as { revision?: unknown }).revision === 'function';
  const plain = await phase1(false);
  const cached = await phase1(true);
  const p1 = daemonHasRevision ? cached : plain;
  console.log(
    `phase 1: the daemon's StatusView ${daemonHasRevision ? 'has' : 'lacks'} revision(); reporting the ${daemonHasRevision ? 'cached' : 'uncached'} figures`,
  );
  let p2: DaemonFigures;
  if (process.env.BENCH_API_SKIP_DAEMON === '1') {
    console.log('phase 2: skipped (BENCH_API_SKIP_DAEMON=1)');
    p2 = { rssMb: NaN, idleCpuPct: NaN, adoptS: NaN, adoptRestarts: NaN };
  } else {
    p2 = await benchDaemon(CONTAINERS).catch((err: unknown) => {
      console.log(`phase 2: failed: ${err instanceof Error ? err.message : String(err)}; printing NaN`);
      return { rssMb: NaN, idleCpuPct: NaN, adoptS: NaN, adoptRestarts: NaN };
    });
  }
  const f = (n: number, d: number): string => (Number.isFinite(n) ? n.toFixed(d) : 'NaN');
  console.log(
    `status_p99_ms=${f(p1.p99, 2)} rps=${f(p1.rps, 0)} rss_mb=${f(p2.rssMb, 1)} idle_cpu_pct=${f(p2.idleCpuPct, 2)} ` +
      `adopt_s=${f(p2.adoptS, 2)} adopt_restarts=${f(p2.adoptRestarts, 0)}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
