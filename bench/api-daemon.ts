/**
 * bench:api's run of the real daemon (bin/spcd.js, after `npm run build`)
 * with N containers of spcd-demo/service:1 (network none). Measures
 * - rss_mb: the daemon's VmRSS, the largest of three samples: 5 s after all N
 *   run, after 30 s of idling, and right after the status load;
 * - idle_cpu_pct: its user+system CPU over 30 s of idling, in % of one core;
 * - the status load the caller runs against its socket (p50, p99, rps);
 * - adopt_s: after SIGTERM and a fresh start, the time from spawning the new
 *   process until GET /v1/status shows all N running (what an operator sees);
 * - adopt_restarts: containers whose id or StartedAt changed across the
 *   restart (checked 5 s after adoption). Goal: 0.
 * Cleans up only containers carrying its own spcd.instance label.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Dockerode from 'dockerode';
import type { SetStatus, StatusDocument } from '../agent/api/types.js';
import { cleanupInstance } from '../test/support/docker.js';
import { writeSleeperSet } from './support/sleeper-set.js';

export interface LoadFigures {
  readonly p50: number;
  readonly p99: number;
  readonly rps: number;
}

export interface DaemonFigures extends LoadFigures {
  readonly rssMb: number;
  readonly idleCpuPct: number;
  readonly adoptS: number;
  readonly adoptRestarts: number;
}

const IDLE_S = Number(process.env.BENCH_API_IDLE_SECONDS ?? 30);
const CLK_TCK = 100; // Linux USER_HZ

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitFor<T>(what: string, ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    await sleep(50);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

function getStatus(socketPath: string): Promise<StatusDocument> {
  return new Promise((resolvePromise, reject) => {
    const req = request({ socketPath, path: '/v1/status', timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (t: string) => (text += t));
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
          resolvePromise(JSON.parse(text) as StatusDocument);
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function runningCount(sets: readonly SetStatus[]): number {
  let n = 0;
  for (const s of sets) n += s.containers.filter((c) => c.state === 'running').length + runningCount(s.sets);
  return n;
}

function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime, stime
}

function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

export async function benchDaemon(
  n: number,
  load: (socketPath: string) => Promise<LoadFigures>,
): Promise<DaemonFigures> {
  const repo = resolve('.');
  if (!existsSync(join(repo, 'dist/main.js')))
    throw new Error('dist/main.js missing: run `npm run build` first');
  const instance = `bench-api-${process.pid}`;
  const prefix = `bapi${process.pid}`;
  const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
  const tmp = mkdtempSync(join(tmpdir(), 'spcd-bench-api-daemon-'));
  mkdirSync(join(tmp, 'sets'));
  mkdirSync(join(tmp, 'state'));
  const socketPath = join(tmp, 'run', 'spcd.sock');
  writeSleeperSet(join(tmp, 'sets', 'bench.yaml'), 'benchapi', 'bench:api adoption', prefix, n);

  const start = (): { child: ChildProcess; stderr: () => string } => {
    const child = spawn(
      join(repo, 'bin/spcd.js'),
      [
        '--sets',
        join(tmp, 'sets'),
        '--state-dir',
        join(tmp, 'state'),
        '--socket',
        socketPath,
        '--instance',
        instance,
        '--healthchecks',
        join(repo, 'healthchecks'),
        '--templates',
        join(repo, 'templates'),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SPCD_LOG_LEVEL: 'warn' } },
    );
    let err = '';
    child.stderr?.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    return { child, stderr: () => err };
  };
  const stop = async (child: ChildProcess): Promise<void> => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(30_000)]);
    if (child.exitCode === null) child.kill('SIGKILL');
  };
  const allRunning = (d: { child: ChildProcess; stderr: () => string }) => async () => {
    if (d.child.exitCode !== null)
      throw new Error(`spcd exited: ${d.stderr().trim().split('\n').slice(-3).join(' | ')}`);
    const doc = await getStatus(socketPath);
    return runningCount(doc.sets) >= n ? doc : undefined;
  };
  const snapshot = async (): Promise<Map<string, string>> => {
    const list = await docker.listContainers({
      all: true,
      filters: { label: [`spcd.instance=${instance}`] },
    });
    const out = new Map<string, string>();
    for (const c of list) {
      const info = await docker.getContainer(c.Id).inspect();
      out.set(c.Labels['spcd.container'] ?? c.Id, `${c.Id}@${info.State.StartedAt}`);
    }
    return out;
  };

  let first: ReturnType<typeof start> | undefined;
  let second: ReturnType<typeof start> | undefined;
  try {
    first = start();
    const t0 = Date.now();
    const d1 = first;
    let peak = 0;
    const sampler = setInterval(() => {
      try {
        if (d1.child.pid !== undefined) peak = Math.max(peak, rssMb(d1.child.pid) || 0);
      } catch {
        // exited between samples; the wait below reports it
      }
    }, 100);
    try {
      await waitFor(`${n} containers running (first start)`, 600_000, async () => {
        if (d1.child.exitCode !== null) throw new Error('exited');
        return allRunning(d1)();
      }).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; ${d1.stderr().trim().split('\n').slice(-3).join(' | ')}`);
      });
    } finally {
      clearInterval(sampler);
    }
    console.log(
      `daemon: first start brought up ${n} containers in ${((Date.now() - t0) / 1000).toFixed(1)} s; ` +
        `peak rss while creating them ${peak.toFixed(1)} MB (sampled every 100 ms)`,
    );
    await sleep(5_000); // let creation churn settle before measuring idle
    const pid = first.child.pid as number;
    const rss = rssMb(pid);
    const c0 = cpuTicks(pid);
    await sleep(IDLE_S * 1000);
    const idlePct = ((cpuTicks(pid) - c0) / CLK_TCK / IDLE_S) * 100;
    const rssAfter = rssMb(pid);
    console.log(
      `daemon: rss=${rss.toFixed(1)} MB (after idle ${rssAfter.toFixed(1)} MB), idle cpu over ${IDLE_S}s=${idlePct.toFixed(2)}% of a core`,
    );
    const loaded = await load(socketPath);
    const rssLoaded = rssMb(pid);
    console.log(`daemon: rss right after the status load=${rssLoaded.toFixed(1)} MB`);

    const before = await snapshot();
    await stop(first.child);
    const t1 = Date.now();
    second = start();
    const d2 = second;
    await waitFor(`${n} containers adopted`, 120_000, allRunning(d2));
    const adoptS = (Date.now() - t1) / 1000;
    await sleep(5_000);
    const after = await snapshot();
    let restarts = 0;
    for (const [name, id] of before) if (after.get(name) !== id) restarts++;
    console.log(
      `daemon: restart adopted ${n} containers in ${adoptS.toFixed(2)} s; ${restarts} restarted or replaced`,
    );
    return {
      ...loaded,
      rssMb: Math.max(rss, rssAfter, rssLoaded),
      idleCpuPct: idlePct,
      adoptS,
      adoptRestarts: restarts,
    };
  } finally {
    if (second) await stop(second.child);
    if (first) await stop(first.child);
    await cleanupInstance(instance);
    rmSync(tmp, { recursive: true, force: true });
  }
}
