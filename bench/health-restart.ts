/**
 * Exit-to-restart through the real daemon: starts `bin/spcd.js` on a
 * temporary set of N busybox containers, SIGKILLs each container's init
 * process from the host once (so every restart is a first restart: spcd's
 * backoff delays only the second failure within its stable period), and
 * measures from the engine's `die` event to the next `start` event of that
 * container (both engine timestamps, nanoseconds). The `start` event follows
 * spcd's start call by the engine's start time, so this is an upper bound
 * on exit -> start call.
 * Returns undefined when dist/main.js is missing (run `npm run build`).
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import Dockerode from 'dockerode';
import { lineSplitter } from '../agent/engine/lines.js';
import type { Logger } from '../agent/log.js';
import { cleanupInstance } from '../test/support/docker.js';
import { writeSleeperSet } from './support/sleeper-set.js';

export interface RestartFigures {
  readonly samples: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

interface Ev {
  status: string;
  id: string;
  name: string;
  timeNano: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

async function waitFor<T>(
  what: string,
  ms: number,
  fn: () => Promise<T | undefined> | T | undefined,
): Promise<T> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

export async function benchExitToRestart(log: Logger): Promise<RestartFigures | undefined> {
  const repo = resolve('.');
  if (!existsSync(join(repo, 'dist/main.js'))) return undefined;
  const N = Number(process.env.BENCH_KILLS ?? 50);
  const instance = `bench-health-${process.pid}`;
  const prefix = `bhr${process.pid}`;
  const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
  const tmp = mkdtempSync(join(tmpdir(), 'spcd-bench-health-'));
  mkdirSync(join(tmp, 'sets'));
  mkdirSync(join(tmp, 'state'));
  writeSleeperSet(join(tmp, 'sets', 'bench.yaml'), 'benchrestart', 'bench:health exit-to-restart', prefix, N);

  const removeOurs = (): Promise<void> => cleanupInstance(instance);

  const daemon = spawn(
    join(repo, 'bin/spcd.js'),
    [
      '--sets',
      join(tmp, 'sets'),
      '--state-dir',
      join(tmp, 'state'),
      '--socket',
      join(tmp, 'spcd.sock'),
      '--instance',
      instance,
      '--healthchecks',
      join(repo, 'healthchecks'),
      '--templates',
      join(repo, 'templates'),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SPCD_LOG_LEVEL: 'info' } },
  );
  // spcd's log (pino, on stderr): its "container started" lines: `time` is when its start call returned, `ms` how long it took,
  // so time - ms is the moment spcd called start.
  const startCalls: { container: string; at: number }[] = [];
  // ... and its "container exited" lines: when spcd noticed the exit (for the breakdown of slow samples).
  const noticed: { container: string; at: number; restartInMs: number }[] = [];
  const stepFailures: string[] = [];
  let out = '';
  const keepLog = process.env.BENCH_RESTART_LOG; // a file to keep spcd's whole log in, for debugging
  daemon.stderr.on('data', (c: Buffer) => {
    if (keepLog) appendFileSync(keepLog, c);
    out += c.toString();
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      if (line.includes('"step failed"')) stepFailures.push(line.slice(0, 300));
      const started = line.includes('"container started"');
      if (!started && !line.includes('"container exited"')) continue;
      try {
        const l = JSON.parse(line) as {
          container?: string;
          time?: number;
          ms?: number;
          restartInMs?: number;
        };
        if (!started && l.container && typeof l.time === 'number')
          noticed.push({ container: l.container, at: l.time, restartInMs: l.restartInMs ?? 0 });
        if (started && l.container && typeof l.time === 'number' && typeof l.ms === 'number')
          startCalls.push({ container: l.container, at: l.time - l.ms });
      } catch {
        /* not a log line */
      }
    }
  });
  let stderr = '';
  daemon.stderr.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
  });
  let exited = false;
  daemon.once('exit', () => (exited = true));
  let events: Readable | undefined;
  try {
    const running = await waitFor(`${N} supervised containers running`, 180_000, async () => {
      if (exited) throw new Error(`the daemon exited: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
      const list = (
        await docker.listContainers({
          filters: { label: [`spcd.instance=${instance}`], status: ['running'] },
        })
      ).filter((c) => c.Labels['spcd.container']?.startsWith(`${prefix}_`));
      // Only this daemon's containers count (bench:health's exec-cost containers carry the same
      // instance label): killing starts once the creation of all N is over.
      return list.length >= N ? list : undefined;
    });
    log.debug({ n: running.length }, 'supervised containers up');

    const seen: Ev[] = [];
    events = (await docker.getEvents({
      filters: { type: ['container'], event: ['die', 'start'], label: [`spcd.instance=${instance}`] },
    })) as unknown as Readable;
    events.on(
      'data',
      lineSplitter((line) => {
        const e = JSON.parse(line) as {
          status: string;
          id: string;
          timeNano: number;
          Actor?: { Attributes?: Record<string, string> };
        };
        // spcd's own label names the container, whatever Docker name a generation has.
        seen.push({
          status: e.status,
          id: e.id,
          name: e.Actor?.Attributes?.['spcd.container'] ?? '',
          timeNano: e.timeNano,
        });
      }),
    );

    // samples: exit (die event) -> spcd's start call (from spcd's log), the issue's figure, returned;
    // toRunning: exit -> the engine's next start event (adds the engine's own start time), printed.
    const samples: number[] = [];
    const toRunning: number[] = [];
    let fromEvent = 0;
    let worst = { ms: -1, line: '' };
    for (let i = 0; i < N; i++) {
      const name = `${prefix}_${i}`;
      const c = await waitFor(`${name} running`, 30_000, async () => {
        const [x] = await docker.listContainers({
          filters: { label: [`spcd.instance=${instance}`, `spcd.container=${name}`], status: ['running'] },
        });
        return x;
      });
      const pid = (await docker.getContainer(c.Id).inspect()).State.Pid;
      if (!pid) throw new Error(`${name} is not running`);
      process.kill(pid, 'SIGKILL');
      const die = await waitFor(`die of ${name}`, 10_000, () =>
        seen.find((e) => e.status === 'die' && e.name === name),
      );
      const start = await waitFor(`restart of ${name}`, 30_000, () =>
        seen.find((e) => e.status === 'start' && e.name === name && e.timeNano > die.timeNano),
      );
      const dieMs = die.timeNano / 1e6;
      toRunning.push(start.timeNano / 1e6 - dieMs);
      // The issue's figure: exit -> spcd's start call. The log line comes once the call returned.
      const call = await waitFor(`spcd's start call for ${name}`, 5_000, () =>
        startCalls.find((s) => s.container === name && s.at >= dieMs - 1),
      ).catch(() => undefined);
      if (call) {
        samples.push(Math.max(0, call.at - dieMs));
        if (call.at - dieMs > worst.ms) {
          const seen = noticed.find((x) => x.container === name && x.at >= dieMs - 1);
          worst = {
            ms: call.at - dieMs,
            line: `die -> spcd noticed the exit ${seen === undefined ? '?' : Math.round(seen.at - dieMs)} ms (backoff ${seen?.restartInMs ?? '?'} ms) -> start call ${Math.round(call.at - dieMs)} ms -> running ${Math.round(start.timeNano / 1e6 - dieMs)} ms`,
          };
        }
      } else {
        fromEvent += 1; // no log line: fall back to the start event (an upper bound)
        samples.push(start.timeNano / 1e6 - dieMs);
      }
    }
    const upRanks = [...toRunning].sort((a, b) => a - b);
    console.log(`slowest exit -> start call: ${worst.line}`);
    // A restart that waited for backoff was not a first restart in spcd's accounting: say why.
    const delayed = noticed.filter((x) => x.restartInMs > 0);
    if (delayed.length)
      console.log(
        `${delayed.length} exit(s) had a backoff delay (an earlier failure of that container within its stable period); step failures logged: ${stepFailures.length}${stepFailures.length ? `\n  ${stepFailures.slice(0, 3).join('\n  ')}` : ''}`,
      );
    console.log(
      `exit (die event) -> running again (start event, includes the engine's start): p50=${Math.round(percentile(upRanks, 50))} ms p99=${Math.round(percentile(upRanks, 99))} ms max=${Math.round(upRanks[upRanks.length - 1] as number)} ms; exit -> spcd's start call taken from spcd's log for ${N - fromEvent}/${N} kills`,
    );
    const sorted = [...samples].sort((a, b) => a - b);
    return {
      samples: sorted.length,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted[sorted.length - 1] as number,
    };
  } finally {
    events?.destroy();
    if (!exited) {
      daemon.kill('SIGTERM');
      await waitFor('the daemon to stop', 20_000, () => (exited ? true : undefined)).catch(() =>
        daemon.kill('SIGKILL'),
      );
    }
    await removeOurs();
    rmSync(tmp, { recursive: true, force: true });
  }
}
