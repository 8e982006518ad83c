/**
 * bench:health — what an exec check costs, and what a host-side probe costs.
 *
 * In one run, on the real engine:
 *  A. spcd: N exec checks (`true`) driven through HealthManager + runExec;
 *     spcd's CPU = this process's process.cpuUsage(); the engine's CPU = the
 *     sum of utime+stime+cutime+cstime of dockerd, containerd and every
 *     containerd-shim (cutime/cstime carry the runc they spawn and reap).
 *  B. raw: the same number of `docker exec true` through dockerode directly.
 *  C. host-side probes (process, tcp) run by this process, no exec.
 *  D. exit-to-restart through the real daemon (bench/health-restart.ts).
 * The last line is the contract:
 *   spcd_cpu_vs_engine=<ratio> hostprobe_vs_exec=<ratio> exit_to_restart_p99_ms=<n>
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import Dockerode from 'dockerode';
import { runExec } from '../agent/engine/exec.js';
import type { ExecEngine } from '../agent/engine/types.js';
import { processProbe, tcpProbe } from '../agent/health/host-probes.js';
import { HealthManager } from '../agent/health/manager.js';
import { createLogger } from '../agent/log.js';
import { systemClock } from '../agent/model/clock.js';
import type { CheckSpec } from '../agent/model/spec.js';
import { benchExitToRestart } from './health-restart.js';

const INSTANCE = `bench-health-${process.pid}`;
const CONTAINERS = Number(process.env.BENCH_CONTAINERS ?? 10);
const CHECKS = Number(process.env.BENCH_CHECKS ?? 300);
const HOST_PROBES = Number(process.env.BENCH_HOST_PROBES ?? 2000);
const CLK_TCK = 100; // USER_HZ on Linux

const docker = new Dockerode({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });
const log = createLogger({ level: 'warn' });

function engineTicks(): number {
  let ticks = 0;
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue;
    try {
      const comm = readFileSync(`/proc/${ent}/comm`, 'utf8').trim();
      if (comm !== 'dockerd' && comm !== 'containerd' && !comm.startsWith('containerd-shim')) continue;
      const f = readFileSync(`/proc/${ent}/stat`, 'utf8');
      const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
      // fields 14..17 (utime stime cutime cstime) are rest[11..14]
      ticks += Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]);
    } catch {
      /* exited */
    }
  }
  return ticks;
}

function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

interface Cost {
  selfMs: number;
  engineMs: number;
  wallMs: number;
}

async function measure(fn: () => Promise<void>): Promise<Cost> {
  const s0 = selfCpuMs();
  const e0 = engineTicks();
  const t0 = Date.now();
  await fn();
  return {
    selfMs: selfCpuMs() - s0,
    engineMs: ((engineTicks() - e0) * 1000) / CLK_TCK,
    wallMs: Date.now() - t0,
  };
}

async function removeOurs(): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`spcd.instance=${INSTANCE}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true })));
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A raw `docker exec true`: create, start (hijacked), wait for the end, inspect. */
async function rawExec(id: string): Promise<void> {
  const exec = await docker.getContainer(id).exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true });
  const stream = (await exec.start({ hijack: true, stdin: false })) as Duplex;
  await new Promise<void>((r) => {
    stream.on('data', () => undefined);
    stream.once('end', r);
    stream.once('close', r);
  });
  stream.destroy();
  await exec.inspect();
}

function fmt(n: number, d = 2): string {
  return Number.isFinite(n) ? n.toFixed(d) : 'NaN';
}

async function main(): Promise<void> {
  await removeOurs();
  const port = await freePort();
  const ids: string[] = [];
  const pids: number[] = [];
  try {
    for (let i = 0; i < CONTAINERS; i++) {
      const c = await docker.createContainer({
        Image: 'spcd-demo/service:1',
        name: `${INSTANCE}-${i}`,
        Cmd:
          i === 0
            ? ['/usr/local/bin/demo-service', 'compute', String(port)]
            : ['/usr/local/bin/demo-service', 'sleep'],
        Labels: { 'spcd.instance': INSTANCE },
        HostConfig: i === 0 ? { NetworkMode: 'host' } : {},
      });
      await c.start();
      ids.push(c.id);
      pids.push((await c.inspect()).State.Pid);
    }
    // Warm up: connections, JIT.
    for (const id of ids) await rawExec(id);

    // A. spcd: HealthManager + runExec, each container checked every 100 ms, until CHECKS have run.
    let done = 0;
    let resolveAll: () => void = () => undefined;
    const all = new Promise<void>((r) => (resolveAll = r));
    const counting: ExecEngine = {
      exec: async (id, req) => {
        const r = await runExec(docker, id, req, log);
        if (++done === CHECKS) resolveAll();
        return r;
      },
    };
    const check: CheckSpec = {
      name: 'true',
      probe: { kind: 'exec', argv: ['true'] },
      schedule: { kind: 'interval', intervalMs: 100 },
      timeoutMs: 5000,
      startPeriodMs: 0,
      failureThreshold: 3,
      successThreshold: 1,
      action: 'none',
      maxOutputBytes: 4096,
    };
    const mgr = new HealthManager({ exec: counting, clock: systemClock, log });
    const a = await measure(async () => {
      ids.forEach((id, i) =>
        mgr.watch({
          name: `bench${i}`,
          containerId: id,
          pid: pids[i] as number,
          network: 'bridge',
          pidMode: 'private',
          startedAtMs: Date.now(),
          checks: [check],
        }),
      );
      await all;
      await mgr.close();
    });
    const checksRun = done;

    // B. raw docker exec, same count, same concurrency (one stream per container).
    let rawDone = 0;
    const b = await measure(async () => {
      await Promise.all(
        ids.map(async (id) => {
          while (rawDone < checksRun) {
            rawDone++;
            await rawExec(id);
          }
        }),
      );
    });

    // C. host-side probes.
    const never = new AbortController().signal;
    const target = { containerId: ids[0] as string, pid: pids[0] as number };
    // Failures are counted, not fatal: on a loaded host a dropped SYN is retried after 1 s.
    let hostFailures = 0;
    const proc = await measure(async () => {
      for (let i = 0; i < HOST_PROBES; i++) {
        if (!(await processProbe('httpd', target, 3000, never)).ok) hostFailures++;
      }
    });
    // The tcp target: a listener in a separate process (busybox httpd forks per
    // connection and drops SYNs under a burst). Only the prober's CPU is counted.
    const tcpPort = await freePort();
    const listener = spawn(
      process.execPath,
      [
        '-e',
        `require('net').createServer((s) => s.destroy()).listen(${tcpPort}, '127.0.0.1', () => console.log('up'))`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((r) => listener.stdout.once('data', () => r()));
    const tcp = await measure(async () => {
      for (let i = 0; i < HOST_PROBES; i++) {
        if (!(await tcpProbe('127.0.0.1', tcpPort, 3000, never)).ok) hostFailures++;
      }
    }).finally(() => listener.kill());

    const spcdPer = a.selfMs / checksRun;
    const enginePerA = a.engineMs / checksRun;
    const rawSelfPer = b.selfMs / rawDone;
    const enginePerB = b.engineMs / rawDone;
    const procPer = proc.selfMs / HOST_PROBES;
    const tcpPer = tcp.selfMs / HOST_PROBES;
    const execCost = spcdPer + enginePerA;
    const hostCost = Math.max(procPer, tcpPer);
    console.log(
      `containers=${CONTAINERS} exec checks=${checksRun} (interval 100 ms each) wall=${a.wallMs} ms`,
    );
    console.log(`spcd (manager+runExec) CPU per exec check: ${fmt(spcdPer, 3)} ms`);
    console.log(`engine CPU per exec check (dockerd+containerd+shims+runc): ${fmt(enginePerA, 3)} ms`);
    console.log(
      `raw dockerode exec: client CPU ${fmt(rawSelfPer, 3)} ms, engine CPU ${fmt(enginePerB, 3)} ms per exec (${rawDone} execs, ${b.wallMs} ms wall)`,
    );
    console.log(`host-side process probe: ${fmt(procPer, 4)} ms CPU per probe (${HOST_PROBES} probes)`);
    console.log(
      `host-side tcp probe: ${fmt(tcpPer, 4)} ms CPU per probe of the prober (${HOST_PROBES} probes)`,
    );
    if (hostFailures) console.log(`host-side probes that failed: ${hostFailures}`);
    console.log(`exec check total (spcd+engine) ${fmt(execCost, 3)} ms vs host probe ${fmt(hostCost, 4)} ms`);

    let p99 = NaN;
    try {
      const r = await benchExitToRestart(log);
      if (r) {
        console.log(
          `exit->restart over ${r.samples} kills: p50=${fmt(r.p50, 0)} ms p99=${fmt(r.p99, 0)} ms max=${fmt(r.max, 0)} ms`,
        );
        p99 = r.p99;
      } else {
        console.log('exit->restart: not measured (daemon not available)');
      }
    } catch (err) {
      console.log(`exit->restart: failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    console.log(
      `spcd_cpu_vs_engine=${fmt(spcdPer / enginePerA, 3)} hostprobe_vs_exec=${fmt(execCost / hostCost, 1)} exit_to_restart_p99_ms=${Number.isFinite(p99) ? Math.round(p99) : 'NaN'}`,
    );
  } finally {
    await removeOurs();
  }
}

main().catch(async (err: unknown) => {
  console.error(err);
  await removeOurs().catch(() => undefined);
  console.log('spcd_cpu_vs_engine=NaN hostprobe_vs_exec=NaN exit_to_restart_p99_ms=NaN');
  process.exitCode = 1;
});
