/**
 * Exec checks against the real dockerd: hung checks are cut off at their
 * timeout and their processes killed from the host; nothing leaks; the start
 * period is honored.
 */
import { readFileSync, readdirSync } from 'node:fs';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExec } from '../../agent/engine/exec.js';
import type { ExecEngine } from '../../agent/engine/types.js';
import { HealthManager } from '../../agent/health/manager.js';
import type { HealthChange } from '../../agent/health/types.js';
import { silentLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import type { CheckSpec } from '../../agent/model/spec.js';
import { waitFor } from '../support/wait.js';

const INSTANCE = 'health-exec-test';
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const log = silentLogger();
const engine: ExecEngine = { exec: (id, req) => runExec(docker, id, req, log) };

async function removeOurs(): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`spcd.instance=${INSTANCE}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true })));
}

async function startContainer(suffix: string): Promise<{ id: string; pid: number; startedAtMs: number }> {
  const c = await docker.createContainer({
    Image: 'spcd-demo/service:1',
    name: `${INSTANCE}-${suffix}-${process.pid}`,
    Cmd: ['/usr/local/bin/demo-service', 'sleep'],
    Labels: { 'spcd.instance': INSTANCE },
  });
  await c.start();
  const info = await c.inspect();
  return { id: c.id, pid: info.State.Pid, startedAtMs: Date.parse(info.State.StartedAt) };
}

/** Host PIDs of `sleep 3600` processes inside the container (read from the host's /proc). */
function hungSleeps(containerId: string): number[] {
  const out: number[] = [];
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue;
    try {
      if (readFileSync(`/proc/${ent}/cmdline`, 'utf8') !== 'sleep\u00003600\u0000') continue;
      const state = readFileSync(`/proc/${ent}/stat`, 'utf8').split(') ')[1]?.[0];
      if (state === 'Z') continue;
      if (readFileSync(`/proc/${ent}/cgroup`, 'utf8').includes(containerId)) out.push(Number(ent));
    } catch {
      /* exited while we looked */
    }
  }
  return out;
}

function fdCount(): number {
  return readdirSync('/proc/self/fd').length;
}

async function execIds(id: string): Promise<string[]> {
  return (await docker.getContainer(id).inspect()).ExecIDs ?? [];
}

function check(o: Partial<CheckSpec>): CheckSpec {
  return {
    name: 'c',
    probe: { kind: 'exec', argv: ['sleep', '3600'] },
    schedule: { kind: 'interval', intervalMs: 10_000 },
    timeoutMs: 1000,
    startPeriodMs: 0,
    failureThreshold: 1,
    successThreshold: 1,
    action: 'restart',
    maxOutputBytes: 4096,
    ...o,
  };
}

describe('exec checks on the real engine', () => {
  let box: { id: string; pid: number; startedAtMs: number };
  beforeAll(async () => {
    await removeOurs();
    box = await startContainer('main');
  });
  afterAll(removeOurs);

  it('cuts off a hung check at its timeout and kills its process from the host', async () => {
    const t0 = Date.now();
    const r = await runExec(
      docker,
      box.id,
      { argv: ['sh', '-c', 'echo going; sleep 3600'], timeoutMs: 1000, maxOutputBytes: 4096 },
      log,
    );
    const failedAfter = Date.now() - t0;
    expect(r).toMatchObject({ timedOut: true, exitCode: null, output: 'going\n' });
    expect(failedAfter).toBeLessThan(1000 + 1000);
    await waitFor('the hung process to be gone', () => hungSleeps(box.id).length === 0, {
      timeoutMs: 1000 + 2000 - (Date.now() - t0),
    });
    await waitFor('no exec left', async () => (await execIds(box.id)).length === 0, { timeoutMs: 2000 });
  });

  it('a hung check turns the container unhealthy within timeout + 1 s, through the manager', async () => {
    const mgr = new HealthManager({ exec: engine, clock: systemClock, log, random: () => 0 });
    const changes: HealthChange[] = [];
    mgr.onChange((c) => changes.push(c));
    const t0 = Date.now();
    mgr.watch({
      name: 'hung',
      containerId: box.id,
      pid: box.pid,
      network: 'bridge',
      pidMode: 'private',
      startedAtMs: box.startedAtMs,
      checks: [check({})],
    });
    const waited = Date.now();
    await waitFor('unhealthy', () => mgr.snapshot('hung')?.status === 'unhealthy', {
      timeoutMs: 5000,
      intervalMs: 20,
    });
    const took = Date.now() - waited;
    expect(took).toBeLessThan(1000 + 1000);
    expect(mgr.snapshot('hung')?.checks[0]?.lastResult).toMatchObject({
      timedOut: true,
      ok: false,
      counted: true,
    });
    expect(changes.some((c) => c.status === 'unhealthy')).toBe(true);
    await waitFor('the hung process to be gone', () => hungSleeps(box.id).length === 0, {
      timeoutMs: 1000 + 2000 - (Date.now() - t0),
    });
    await mgr.close();
  });

  it('leaves no process, exec ID or file descriptor behind after 200 hung checks', async () => {
    // Warm up the HTTP agent's sockets so the "before" count includes them.
    await runExec(docker, box.id, { argv: ['true'], timeoutMs: 5000, maxOutputBytes: 100 }, log);
    const fdsBefore = fdCount();
    const execsBefore = (await execIds(box.id)).length;
    const CONCURRENCY = 8;
    const TOTAL = 200;
    let next = 0;
    let timedOut = 0;
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < TOTAL) {
          next++;
          const r = await runExec(
            docker,
            box.id,
            { argv: ['sleep', '3600'], timeoutMs: 300, maxOutputBytes: 1024 },
            log,
          );
          if (r.timedOut) timedOut++;
        }
      }),
    );
    const wall = Date.now() - t0;
    expect(timedOut).toBe(TOTAL);
    await waitFor('no hung sleep left', () => hungSleeps(box.id).length === 0, { timeoutMs: 3000 });
    await waitFor('no exec ID left', async () => (await execIds(box.id)).length <= execsBefore, {
      timeoutMs: 3000,
    });
    // Tolerance: Node 20's global HTTP agent keeps idle keep-alive sockets to
    // the engine, up to one per concurrent request; they are closed after its
    // idle timeout, so allow CONCURRENCY of them plus 2 for vitest's own pipes.
    await waitFor('file descriptors back to their count', () => fdCount() <= fdsBefore + CONCURRENCY + 2, {
      timeoutMs: 10_000,
    });
    console.log(
      `200 hung checks, ${CONCURRENCY} at a time, timeout 300 ms: ${wall} ms wall; fds ${fdsBefore} -> ${fdCount()}`,
    );
  });

  it('returns exit code and output tail; maps engine refusals to typed errors', async () => {
    const r = await runExec(
      docker,
      box.id,
      { argv: ['sh', '-c', 'seq 1 5000; echo oops >&2; exit 3'], timeoutMs: 5000, maxOutputBytes: 16 },
      log,
    );
    // stdout and stderr travel as separate frames: their relative order is not
    // guaranteed, so the tail is checked on stdout alone, stderr separately.
    expect(r).toMatchObject({ exitCode: 3, timedOut: false });
    expect(r.output.length).toBeLessThanOrEqual(16);
    expect(r.output).toMatch(/5000\n/);
    const err = await runExec(
      docker,
      box.id,
      { argv: ['sh', '-c', 'echo oops >&2; exit 4'], timeoutMs: 5000, maxOutputBytes: 16 },
      log,
    );
    expect(err).toMatchObject({ exitCode: 4, output: 'oops\n' });
    const tail = await runExec(
      docker,
      box.id,
      { argv: ['seq', '1', '5000'], timeoutMs: 5000, maxOutputBytes: 16 },
      log,
    );
    expect(tail).toMatchObject({ exitCode: 0, output: '\n4998\n4999\n5000\n'.slice(-16) });
    await expect(
      runExec(docker, 'spcd-no-such-container', { argv: ['true'], timeoutMs: 5000, maxOutputBytes: 16 }, log),
    ).rejects.toMatchObject({ code: 'ENGINE_NOT_FOUND' });
    const stopped = await docker.createContainer({
      Image: 'spcd-demo/service:1',
      Labels: { 'spcd.instance': INSTANCE },
    });
    await expect(
      runExec(docker, stopped.id, { argv: ['true'], timeoutMs: 5000, maxOutputBytes: 16 }, log),
    ).rejects.toMatchObject({ code: 'ENGINE_CONFLICT' });
  });

  it('kills the exec when the caller aborts', async () => {
    const ac = new AbortController();
    const p = runExec(
      docker,
      box.id,
      { argv: ['sleep', '3600'], timeoutMs: 60_000, maxOutputBytes: 16, signal: ac.signal },
      log,
    );
    await waitFor('the sleep to run', () => hungSleeps(box.id).length === 1, { timeoutMs: 5000 });
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ENGINE_TIMEOUT', details: { aborted: true } });
    await waitFor('the sleep to be gone', () => hungSleeps(box.id).length === 0, { timeoutMs: 2000 });
  });

  it('does not count failures during the start period', async () => {
    const fresh = await startContainer('startperiod');
    const P = 3000;
    const mgr = new HealthManager({ exec: engine, clock: systemClock, log, random: () => 0 });
    mgr.watch({
      name: 'sp',
      containerId: fresh.id,
      pid: fresh.pid,
      network: 'bridge',
      pidMode: 'private',
      startedAtMs: fresh.startedAtMs,
      checks: [
        check({
          probe: { kind: 'exec', argv: ['false'] },
          schedule: { kind: 'interval', intervalMs: 400 },
          startPeriodMs: P,
        }),
      ],
    });
    let unhealthyAt = 0;
    mgr.onChange((c) => {
      if (c.status === 'unhealthy' && !unhealthyAt) unhealthyAt = Date.now();
    });
    await waitFor('unhealthy after the start period', () => unhealthyAt > 0, { timeoutMs: P + 5000 });
    expect(unhealthyAt).toBeGreaterThanOrEqual(fresh.startedAtMs + P);
    const h = mgr.snapshot('sp')?.checks[0]?.history ?? [];
    const during = h.filter((r) => r.at < fresh.startedAtMs + P);
    expect(during.length).toBeGreaterThan(2);
    expect(during.every((r) => !r.ok && !r.counted && r.exitCode === 1)).toBe(true);
    expect(h.filter((r) => r.counted)).toHaveLength(1);
    await mgr.close();
  });
});
