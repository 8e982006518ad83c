/**
 * Healing on a real dockerd, through the real daemon process (bin/spcd.js):
 * a failing check is healed within failure_threshold × interval + 1 s, a
 * crash-looping process is restarted a bounded number of times and reported
 * crash-looping, and a start period is honored (on every start).
 *
 * Every container of the file runs from the start, under one spcd; the
 * engine's own start/die events (with their nanosecond times) are recorded
 * from before spcd starts, so each test reads a timeline instead of sleeping.
 */
import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF, delayFor } from '../../agent/model/backoff.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import {
  cleanupInstance,
  docker,
  inspect,
  recordContainerEvents,
  type EngineEventRecord,
} from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('healing');
const n = (s: string): string => `${sb.instance}-${s}`;

const INTERVAL_MS = 1_000;
const THRESHOLD = 2;
const START_PERIOD_MS = 4_000;
/** The window over which test 2 counts the restarts of a process that always exits 1. */
const CRASH_WINDOW_MS = 12_000;

/** An image of this file only: the demo image plus a Docker HEALTHCHECK that fails once /tmp/dfail exists. */
const HC_IMAGE = `spcd-demo/hc-${sb.instance.toLowerCase()}:1`;

const SET = `
set: healing
containers:
  ${n('flip')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 2s
    healthchecks:
      - name: flag
        exec: [sh, -c, 'test ! -f /tmp/fail']
        interval: ${INTERVAL_MS}ms
        timeout: 500ms
        failure_threshold: ${THRESHOLD}
  ${n('crash')}:
    image: spcd-demo/service:crash
    command: [demo-service, sleep]
    network: none
  ${n('late')}:
    image: spcd-demo/service:unhealthy
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 2s
    healthchecks:
      - name: own
        exec: [demo-check]
        interval: ${INTERVAL_MS}ms
        timeout: 500ms
        start_period: ${START_PERIOD_MS}ms
        failure_threshold: 1
  ${n('dh')}:
    image: ${HC_IMAGE}
    command: [demo-service, sleep]
    network: none
    healthchecks:
      - name: own
        exec: ['true']
        interval: ${INTERVAL_MS}ms
        timeout: 500ms
        action: none
`;

type EngineEvent = EngineEventRecord;

/** GET on spcd's API socket; answers the status and the parsed JSON body. */
function api(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sb.socket, path, method: 'GET', timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
        } catch (err) {
          reject(err as Error);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

let timeline: readonly EngineEvent[] = [];
let spcd: SpcdProcess;

/** The engine's start/die events of this file's containers, with the engine's own times. */
let recorder: Awaited<ReturnType<typeof recordContainerEvents>> | undefined;
async function recordEngineEvents(): Promise<void> {
  recorder = await recordContainerEvents({
    event: ['start', 'die', 'exec_start'],
    label: [`spcd.instance=${sb.instance}`],
  });
  timeline = recorder.seen;
}

const eventsOf = (name: string, action: string): EngineEvent[] =>
  timeline.filter((e) => e.name === name && e.action === action);

/** spcd's log lines (pino JSON) that mention a container and a message. */
function logLines(container: string, msg: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const l of spcd.output) {
    if (!l.includes(container) || !l.includes(msg)) continue;
    try {
      out.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      /* not JSON */
    }
  }
  return out;
}

beforeAll(async () => {
  const base = execFileSync('/usr/bin/docker', ['create', 'spcd-demo/service:1']).toString().trim();
  try {
    execFileSync('/usr/bin/docker', [
      'commit',
      '--change',
      `HEALTHCHECK --interval=1s --timeout=1s --retries=1 CMD ["/bin/sh", "-c", "test ! -f /tmp/dfail"]`,
      base,
      HC_IMAGE,
    ]);
  } finally {
    execFileSync('/usr/bin/docker', ['rm', base]);
  }
  await recordEngineEvents();
  writeSet(sb, 'healing.yaml', SET);
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor('flip running', async () => (await inspect(n('flip')))?.State.Running, {
    timeoutMs: 20_000,
  });
});

afterAll(async () => {
  await spcd?.stop();
  recorder?.close();
  await cleanupInstance(sb.instance);
  await docker()
    .getImage(HC_IMAGE)
    .remove({ force: true })
    .catch(() => undefined);
});

describe('healing on a real engine', () => {
  it(`restarts a container whose check starts failing: new State.StartedAt <= (moment before the docker exec that makes it fail) + ${THRESHOLD} × ${INTERVAL_MS} ms + 1000 ms`, async () => {
    const name = n('flip');
    // spcd probes it already (its exec ran at least twice): the failure is a change, not a first result.
    await waitFor('flip probed by spcd', () => eventsOf(name, 'exec_start').length >= 2, {
      timeoutMs: 10_000,
    });
    const before = (await inspect(name))!.State.StartedAt;
    const t0 = Date.now(); // before the file exists: the measured span can only be longer than the real one
    execFileSync('/usr/bin/docker', ['exec', name, 'touch', '/tmp/fail']);
    const touched = Date.now();
    const after = await waitFor(
      'flip restarted',
      async () => {
        const c = await inspect(name);
        return c?.State.Running && c.State.StartedAt !== before ? c.State.StartedAt : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    const elapsed = Date.parse(after) - t0;
    const rel = (ms: number | undefined): string => (ms === undefined ? '?' : String(ms - t0));
    const logAt = (msg: string): number | undefined =>
      logLines(name, msg).find((l) => (l.time as number) >= t0)?.time as number | undefined;
    console.log(
      `check failing -> container started again: ${elapsed} ms (after t0: touch done ${rel(touched)}, probes ${eventsOf(
        name,
        'exec_start',
      )
        .filter((e) => e.at >= t0 - INTERVAL_MS)
        .map((e) => e.at - t0)
        .join(' ')}, threshold logged ${rel(logAt('crossed its failure threshold'))}, restart logged ${rel(
        logAt('restarting unhealthy container'),
      )}, die ${rel(eventsOf(name, 'die').find((e) => e.at >= t0)?.at)}, start ${elapsed})`,
    );
    // The bound includes the wait for the next probe (up to one interval), THRESHOLD failing probes, and the stop + start.
    expect(elapsed).toBeLessThanOrEqual(THRESHOLD * INTERVAL_MS + 1_000);
    // spcd said why: the health room's threshold line and the reconciler's restart.
    expect(logLines(name, 'health check crossed its failure threshold').length).toBeGreaterThanOrEqual(1);
    await waitFor('spcd logged the restart', () => logLines(name, 'restarting unhealthy container')[0], {
      timeoutMs: 5_000,
    });
    // The stop and the start were the engine's, on the same container.
    expect(eventsOf(name, 'die').some((e) => e.at >= t0)).toBe(true);
  });

  it('honors the start period: no failure counted during it, a restart after it, and again after a restart', async () => {
    const name = n('late');
    const starts = await waitFor(
      'late restarted twice by spcd (a start period on each start)',
      () => {
        const s = eventsOf(name, 'start');
        return s.length >= 3 ? s : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const dies = eventsOf(name, 'die');
    for (let i = 0; i < 2; i++) {
      const startedAt = starts[i]!.at;
      const stoppedAt = dies.find((d) => d.at >= startedAt)!.at;
      const ranMs = stoppedAt - startedAt;
      console.log(`start ${i + 1}: stopped by spcd after ${ranMs} ms (start period ${START_PERIOD_MS} ms)`);
      // Not during P: the check fails from its first probe, yet no failure may count before P ends.
      expect(ranMs).toBeGreaterThanOrEqual(START_PERIOD_MS);
      // After P: the next probe (within one interval) is counted (threshold 1), then spcd restarts it
      // after its backoff (the first restart is immediate, the second waits delayFor(2) = 1 s); 1 s slack.
      expect(ranMs).toBeLessThanOrEqual(
        START_PERIOD_MS + INTERVAL_MS + delayFor(i + 1, DEFAULT_BACKOFF) + 1_000,
      );
    }
  });

  it(`restarts a process that always exits 1 a bounded number of times in ${CRASH_WINDOW_MS} ms, and reports it crash-looping`, async () => {
    const name = n('crash');
    // Backoff (agent/model/backoff.ts): the restart after the k-th exit in a row waits delayFor(k):
    // 0, 1 s, 2 s, 4 s, 8 s ... The earliest time of the k-th restart after the first start is the
    // sum of those delays (an exit happens right after each start), so within the window:
    let upper = 0;
    let earliest = 0;
    for (let k = 1; ; k++) {
      earliest += delayFor(k, DEFAULT_BACKOFF);
      if (earliest > CRASH_WINDOW_MS) break;
      upper = k;
    }
    expect(upper).toBe(4); // restarts at about 0, 1, 3, 7 s; the 5th no earlier than 15 s
    const first = await waitFor('crash started once', () => eventsOf(name, 'start')[0], {
      timeoutMs: 10_000,
    });
    // The 5th exit in a row makes it crash-looping (after the 4th restart, about 7 s in).
    const reported = await waitFor(
      'spcd reported crash-looping',
      () => logLines(name, 'crash-looping').find((l) => l.to === 'crash-looping'),
      { timeoutMs: CRASH_WINDOW_MS + 5_000, intervalMs: 50 },
    );
    expect(reported.failures).toBeGreaterThanOrEqual(DEFAULT_BACKOFF.crashLoopAfter);
    // ... and the API says so (between two slow restarts the container is exited: crash-looping).
    const view = await waitFor(
      'API state crash-looping',
      async () => {
        const r = await api(`/v1/containers/${name}`);
        return r.body.state === 'crash-looping' ? r.body : undefined;
      },
      { timeoutMs: 5_000 },
    );
    expect(view.restartCount).toBeGreaterThanOrEqual(upper);
    // Measuring that nothing more happens: wait for the window's end, then count.
    const left = first.at + CRASH_WINDOW_MS - Date.now();
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    const restarts = eventsOf(name, 'start').filter((e) => e.at <= first.at + CRASH_WINDOW_MS).length - 1;
    console.log(
      `crash: ${restarts} restarts in ${CRASH_WINDOW_MS} ms (bound ${upper}); start times (ms after the first): ${eventsOf(
        name,
        'start',
      )
        .map((e) => e.at - first.at)
        .join(', ')}`,
    );
    expect(restarts).toBeLessThanOrEqual(upper);
    // Lower bound: the first three restarts are due by 0 + 1 + 2 = 3 s plus each exit's detection.
    expect(restarts).toBeGreaterThanOrEqual(upper - 1);
    // Still retried (never dropped): spcd keeps it desired and the next restart comes at the next delay.
    expect(logLines(name, 'step failed').length).toBe(0);
  });

  it("reads the image's Docker HEALTHCHECK status and reports it beside spcd's own checks", async () => {
    const name = n('dh');
    const both = await waitFor(
      'docker health healthy beside a healthy spcd check',
      async () => {
        const h = (await api(`/v1/containers/${name}/health`)).body;
        const checks = h.checks as { name: string; status: string }[];
        return h.dockerHealth === 'healthy' && checks[0]?.status === 'healthy' ? h : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    expect((both.checks as { name: string }[]).map((c) => c.name)).toEqual(['own']);
    expect((await api(`/v1/containers/${name}`)).body.dockerHealth).toBe('healthy');
    // Docker's check turns unhealthy; spcd's own stays healthy, and both are reported as they are.
    execFileSync('/usr/bin/docker', ['exec', name, 'touch', '/tmp/dfail']);
    const after = await waitFor(
      'docker health unhealthy',
      async () => {
        const h = (await api(`/v1/containers/${name}/health`)).body;
        return h.dockerHealth === 'unhealthy' ? h : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    expect((after.checks as { status: string }[])[0]?.status).toBe('healthy');
    expect(after.status).toBe('healthy'); // spcd's verdict comes from its own checks
    expect((await api(`/v1/containers/${name}`)).body.dockerHealth).toBe('unhealthy');
  });
});
