/**
 * `npm run bench:peer-cred`: what naming the caller of one audited request
 * costs. A unix socket server with 50 client connections held open; on one
 * accepted connection it times
 * - the SO_PEERCRED lookup spcd uses (agent/api/peer-cred.ts, getsockopt
 *   through koffi), 200,000 calls;
 * - one run of `ss -xpnH`, the table the audit uid used to be parsed from,
 *   200 runs in a row: wall time, and the CPU of the ss processes (their
 *   user + system time, from this process's children times in /proc).
 * The last line is the contract:
 *   peercred_ns_per_call=<n> ss_ms_per_call=<n> ss_cpu_ms_per_call=<n> unix_sockets=<n>
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPeerCredLookup } from '../agent/api/peer-cred.js';

const CLIENTS = 50;
const LOOKUPS = 200_000;
const SS_RUNS = 200;
/** USER_HZ: the unit of the times in /proc/<pid>/stat. */
const TICKS_PER_SECOND = 100;

function ss(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ss', ['-xpnH'], { maxBuffer: 64 * 1024 * 1024 }, (err, out) =>
      err ? reject(err) : resolve(out),
    );
  });
}

/** CPU time (ms) of this process's waited-for children: cutime + cstime of /proc/self/stat. */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / TICKS_PER_SECOND;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-bench-peercred-'));
  const path = join(dir, 'bench.sock');
  const accepted: Socket[] = [];
  const server = createServer((s) => accepted.push(s));
  await new Promise<void>((r) => server.listen(path, r));
  const clients = await Promise.all(
    Array.from(
      { length: CLIENTS },
      () =>
        new Promise<Socket>((r) => {
          const c = createConnection(path, () => r(c));
        }),
    ),
  );
  while (accepted.length < CLIENTS) await new Promise((r) => setImmediate(r));

  const lookup = createPeerCredLookup();
  const socket = accepted[0] as Socket;
  const first = lookup(socket);
  if (first?.pid !== process.pid)
    throw new Error(`SO_PEERCRED named ${JSON.stringify(first)}, not this process`);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < LOOKUPS; i++) lookup(socket);
  const peercredNs = Number(process.hrtime.bigint() - t0) / LOOKUPS;

  const rows = (await ss()).split('\n').filter((l) => l.trim() !== '').length;
  const cpu0 = childrenCpuMs();
  const t1 = process.hrtime.bigint();
  for (let i = 0; i < SS_RUNS; i++) await ss();
  const ssMs = Number(process.hrtime.bigint() - t1) / 1e6 / SS_RUNS;
  const ssCpuMs = (childrenCpuMs() - cpu0) / SS_RUNS;

  for (const c of clients) c.destroy();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });

  console.log(`SO_PEERCRED: ${peercredNs.toFixed(0)} ns per lookup (${LOOKUPS} lookups)`);
  console.log(
    `ss -xpnH: ${ssMs.toFixed(2)} ms wall, ${ssCpuMs.toFixed(2)} ms CPU per run (${SS_RUNS} runs, ${rows} unix sockets listed)`,
  );
  console.log(
    `peercred_ns_per_call=${peercredNs.toFixed(0)} ss_ms_per_call=${ssMs.toFixed(2)} ss_cpu_ms_per_call=${ssCpuMs.toFixed(2)} unix_sockets=${rows}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
