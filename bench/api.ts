/**
 * `npm run bench:api`: the real daemon (bin/spcd.js on the built dist/) with
 * 200 real demo containers (bench/api-daemon.ts). It measures
 * - GET /v1/status under autocannon over the unix socket: p50/p99 latency and
 *   requests per second (10 connections, after a 2 s warm-up);
 * - spcd's resident memory and its CPU while idle over 30 s;
 * - the time to adopt all 200 after a restart, and how many were restarted.
 * The last line is the contract:
 *   status_p99_ms=<n> rps=<n> rss_mb=<n> idle_cpu_pct=<n> adopt_s=<n> adopt_restarts=<n>
 */
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { benchDaemon, type DaemonFigures, type LoadFigures } from './api-daemon.js';

interface AutocannonResult {
  latency: { p50: number; p99: number; average: number; max: number };
  requests: { average: number; total: number };
  errors: number;
  non2xx: number;
  throughput: { average: number };
}
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

const CONTAINERS = Number(process.env.BENCH_API_CONTAINERS ?? 200);
const CONNECTIONS = Number(process.env.BENCH_API_CONNECTIONS ?? 10);
const SECONDS = Number(process.env.BENCH_API_SECONDS ?? 10);

/** One GET; resolves with the body's size (the daemon keeps what it built for it, e.g. the OpenAPI document). */
function getOnce(socketPath: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path }, (res) => {
      let size = 0;
      res.on('data', (c: Buffer) => (size += c.length));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(size) : reject(new Error(`${path}: ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** autocannon against GET /v1/status on the daemon's socket. */
async function loadStatus(socketPath: string): Promise<LoadFigures> {
  // the OpenAPI document is built at its first request and kept: count it in the RSS
  const docBytes = await getOnce(socketPath, '/v1/openapi.json');
  console.log(`openapi: GET /v1/openapi.json answered ${(docBytes / 1024).toFixed(1)} KiB`);
  const require = createRequire(import.meta.url);
  const autocannon = require('autocannon') as Autocannon;
  const run = (duration: number): Promise<AutocannonResult> =>
    autocannon({
      url: 'http://localhost/v1/status',
      socketPath,
      connections: CONNECTIONS,
      pipelining: 1,
      duration,
    });
  await run(2); // warm-up: JIT, connection setup
  const r = await run(SECONDS);
  const bodyKb = r.requests.total > 0 ? r.throughput.average / r.requests.average / 1024 : NaN;
  console.log(
    `load: GET /v1/status, ${CONTAINERS} containers (~${bodyKb.toFixed(0)} KiB per answer), ${CONNECTIONS} connections, ${SECONDS} s: ` +
      `p50=${r.latency.p50} ms p99=${r.latency.p99} ms avg=${r.latency.average} ms max=${r.latency.max} ms ` +
      `rps=${r.requests.average} total=${r.requests.total} errors=${r.errors} non2xx=${r.non2xx}`,
  );
  if (r.errors > 0 || r.non2xx > 0)
    throw new Error(`${r.errors} errors and ${r.non2xx} non-2xx answers under load`);
  return { p50: r.latency.p50, p99: r.latency.p99, rps: r.requests.average };
}

async function main(): Promise<void> {
  const none = { p50: NaN, p99: NaN, rps: NaN, rssMb: NaN, idleCpuPct: NaN, adoptS: NaN, adoptRestarts: NaN };
  const d: DaemonFigures = await benchDaemon(CONTAINERS, loadStatus).catch((err: unknown) => {
    console.log(`bench:api failed: ${err instanceof Error ? err.message : String(err)}; printing NaN`);
    process.exitCode = 1;
    return none;
  });
  const f = (n: number, dp: number): string => (Number.isFinite(n) ? n.toFixed(dp) : 'NaN');
  console.log(
    `status_p99_ms=${f(d.p99, 2)} rps=${f(d.rps, 0)} rss_mb=${f(d.rssMb, 1)} idle_cpu_pct=${f(d.idleCpuPct, 2)} ` +
      `adopt_s=${f(d.adoptS, 2)} adopt_restarts=${f(d.adoptRestarts, 0)}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
