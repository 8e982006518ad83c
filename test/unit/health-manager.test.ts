import { describe, expect, it } from 'vitest';
import { SpcdError, isSpcdError } from '../../agent/errors.js';
import type { ExecEngine, ExecRequest, ExecResult } from '../../agent/engine/types.js';
import { HealthManager } from '../../agent/health/manager.js';
import { nextCronMatch } from '../../agent/health/schedule.js';
import type {
  HealthAction,
  HealthChange,
  HostProbes,
  ProbeOutcome,
  WatchTarget,
} from '../../agent/health/types.js';
import { PROBE_GRACE_MS } from '../../agent/health/worker.js';
import { silentLogger } from '../../agent/log.js';
import type { CheckSpec } from '../../agent/model/spec.js';
import { FakeClock } from '../support/fake-clock.js';
import cron from 'node-cron';

/** An exec engine whose calls wait until the test answers them. */
class FakeExec implements ExecEngine {
  calls: { containerId: string; req: ExecRequest; answer: (r: Partial<ExecResult> | Error) => void }[] = [];
  /** When set, every call is answered at once with this. */
  auto: ((req: ExecRequest) => Partial<ExecResult> | Error) | undefined;

  exec(containerId: string, req: ExecRequest): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      const answer = (r: Partial<ExecResult> | Error): void => {
        if (r instanceof Error) reject(r);
        else resolve({ exitCode: 0, timedOut: false, output: '', durationMs: 1, ...r });
      };
      if (this.auto) answer(this.auto(req));
      else this.calls.push({ containerId, req, answer });
    });
  }

  /** Answers the oldest pending call. */
  answerNext(r: Partial<ExecResult> | Error): void {
    const c = this.calls.shift();
    if (!c) throw new Error('no pending exec');
    c.answer(r);
  }
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
};

function check(o: Partial<CheckSpec> = {}): CheckSpec {
  return {
    name: 'c1',
    probe: { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_port', '80'] },
    schedule: { kind: 'interval', intervalMs: 1000 },
    timeoutMs: 500,
    startPeriodMs: 0,
    failureThreshold: 3,
    successThreshold: 1,
    action: 'restart',
    maxOutputBytes: 4096,
    ...o,
  };
}

function target(checks: CheckSpec[], o: Partial<WatchTarget> = {}): WatchTarget {
  return {
    name: 'nova_compute',
    containerId: 'c0ffee',
    pid: 1234,
    network: 'bridge',
    pidMode: 'private',
    startedAtMs: 1_700_000_000_000,
    checks,
    ...o,
  };
}

function setup(opts: { random?: () => number; historySize?: number; hostProbes?: HostProbes } = {}) {
  const clock = new FakeClock();
  const exec = new FakeExec();
  const mgr = new HealthManager({
    exec,
    clock,
    log: silentLogger(),
    random: opts.random ?? (() => 0),
    ...(opts.historySize ? { historySize: opts.historySize } : {}),
    ...(opts.hostProbes ? { hostProbes: opts.hostProbes } : {}),
  });
  const changes: HealthChange[] = [];
  const actions: HealthAction[] = [];
  mgr.onChange((c) => changes.push(c));
  mgr.onAction((a) => actions.push(a));
  const failures: string[] = [];
  mgr.onFailure((name, check) => failures.push(`${name}/${check}`));
  return { clock, exec, mgr, changes, actions, failures };
}

/** Advances to the next probe and answers it. */
async function step(
  env: ReturnType<typeof setup>,
  ms: number,
  r: Partial<ExecResult> | Error,
): Promise<void> {
  env.clock.advance(ms);
  await flush();
  env.exec.answerNext(r);
  await flush();
}

describe('health workers', () => {
  it('turns unhealthy at the failure threshold, emits one action, and needs successThreshold successes to recover', async () => {
    const env = setup();
    env.mgr.watch(target([check({ successThreshold: 2 })]));
    await step(env, 0, { exitCode: 0 });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('starting');
    await step(env, 1000, { exitCode: 0 });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('healthy');
    await step(env, 1000, { exitCode: 1, output: 'no listener on 80' });
    await step(env, 1000, { exitCode: 1, output: 'no listener on 80' });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('healthy');
    expect(env.actions).toHaveLength(0);
    await step(env, 1000, { exitCode: 1, output: 'still none' });
    const snap = env.mgr.snapshot('nova_compute');
    expect(snap?.status).toBe('unhealthy');
    expect(snap?.checks[0]?.consecutiveFailures).toBe(3);
    expect(env.actions).toHaveLength(1);
    expect(env.actions[0]).toMatchObject({
      name: 'nova_compute',
      containerId: 'c0ffee',
      check: 'c1',
      action: 'restart',
      lastOutputs: ['no listener on 80', 'no listener on 80', 'still none'],
    });
    // Failing on: no new action until another threshold's worth of failures.
    await step(env, 1000, { exitCode: 1 });
    await step(env, 1000, { exitCode: 1 });
    expect(env.actions).toHaveLength(1);
    await step(env, 1000, { exitCode: 1 });
    expect(env.actions).toHaveLength(2);
    await step(env, 1000, { exitCode: 0 });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('unhealthy');
    await step(env, 1000, { exitCode: 0 });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('healthy');
  });

  it('emits no action for action none, and stop for action stop', async () => {
    const env = setup();
    env.mgr.watch(target([check({ name: 'a', action: 'none', failureThreshold: 1 })]));
    await step(env, 0, { exitCode: 1 });
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('unhealthy');
    expect(env.actions).toHaveLength(0);
    env.mgr.watch(
      target([check({ name: 'b', action: 'stop', failureThreshold: 1 })], { containerId: 'other' }),
    );
    await step(env, 0, { exitCode: 1 });
    expect(env.actions.map((a) => a.action)).toEqual(['stop']);
  });

  it('counts a timeout as a failure', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 1 })]));
    await step(env, 0, { exitCode: null, timedOut: true, output: 'partial' });
    const c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c?.status).toBe('unhealthy');
    expect(c?.lastResult).toMatchObject({
      ok: false,
      timedOut: true,
      exitCode: null,
      counted: true,
      output: 'partial',
    });
  });

  it('does not count failures during the start period; a success ends it early', async () => {
    const env = setup();
    const start = env.clock.now();
    env.mgr.watch(target([check({ failureThreshold: 1, startPeriodMs: 5000 })], { startedAtMs: start }));
    // Probes at +0 .. +4 s fall inside the 5 s start period.
    for (let i = 0; i < 5; i++) await step(env, i === 0 ? 0 : 1000, { exitCode: 1 });
    let c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c?.status).toBe('starting');
    expect(c?.consecutiveFailures).toBe(0);
    expect(c?.history.map((h) => h.counted)).toEqual([false, false, false, false, false]);
    expect(env.actions).toHaveLength(0);
    expect(env.failures).toEqual([]); // the failures metric counts only counted failures
    // At start + 5 s the start period is over: the next failure counts.
    await step(env, 1000, { exitCode: 1 });
    c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c?.status).toBe('unhealthy');
    expect(env.actions).toHaveLength(1);
    await step(env, 1000, { exitCode: 1 });
    await step(env, 1000, { exitCode: 0 });
    expect(env.failures).toEqual(['nova_compute/c1', 'nova_compute/c1']);

    const env2 = setup();
    env2.mgr.watch(
      target([check({ failureThreshold: 1, startPeriodMs: 60_000 })], { startedAtMs: env2.clock.now() }),
    );
    await step(env2, 0, { exitCode: 0 });
    await step(env2, 1000, { exitCode: 1 });
    expect(env2.mgr.snapshot('nova_compute')?.status).toBe('unhealthy');
  });

  it('jitters the first probe in [0, interval) with the injected random', async () => {
    const env = setup({ random: () => 0.25 });
    env.mgr.watch(target([check({ schedule: { kind: 'interval', intervalMs: 10_000 } })]));
    env.clock.advance(2499);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.clock.advance(1);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
    env.exec.answerNext({ exitCode: 0 });
    await flush();
    env.clock.advance(9999);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.clock.advance(1);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
  });

  it('with start_interval: probes at once, then at that cadence until the first success, then at its interval', async () => {
    // random 0.9 would delay a jittered first probe by 9 s: start_interval must not wait for it.
    const env = setup({ random: () => 0.9 });
    const start = env.clock.now();
    env.mgr.watch(
      target(
        [
          check({
            schedule: { kind: 'interval', intervalMs: 10_000 },
            startPeriodMs: 60_000,
            startIntervalMs: 200,
            timeoutMs: 150,
          }),
        ],
        { startedAtMs: start },
      ),
    );
    env.clock.advance(0);
    await flush();
    expect(env.exec.calls).toHaveLength(1); // at once
    env.exec.answerNext({ exitCode: 1 });
    await flush();
    env.clock.advance(199);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.clock.advance(1);
    await flush();
    expect(env.exec.calls).toHaveLength(1); // +200 ms
    env.exec.answerNext({ exitCode: 0 });
    await flush();
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('healthy');
    // After the first success: the interval again, from that probe's start (+200 ms).
    env.clock.advance(9_999);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.clock.advance(1);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
  });

  it('with start_interval: the start period over, the interval applies even without a success', async () => {
    const env = setup({ random: () => 0 });
    const start = env.clock.now();
    env.mgr.watch(
      target(
        [
          check({
            schedule: { kind: 'interval', intervalMs: 1000 },
            startPeriodMs: 500,
            startIntervalMs: 100,
            timeoutMs: 50,
          }),
        ],
        { startedAtMs: start - 600 }, // its start period ended before the watch
      ),
    );
    env.clock.advance(0);
    await flush();
    expect(env.exec.calls).toHaveLength(1); // random 0: the jittered first probe is at once too
    env.exec.answerNext({ exitCode: 1 });
    await flush();
    env.clock.advance(999);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.clock.advance(1);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
  });

  it('keeps at most one probe in flight, and cuts off a probe that ignores its timeout', async () => {
    const env = setup();
    env.mgr.watch(target([check({ timeoutMs: 500, failureThreshold: 1 })]));
    env.clock.advance(0);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
    const signal = env.exec.calls[0]?.req.signal;
    // Still in flight after many intervals: never a second exec.
    for (let i = 0; i < 10; i++) {
      env.clock.advance(1000);
      await flush();
    }
    expect(env.exec.calls).toHaveLength(1);
    // The worker counted it as a timed-out failure at timeout + grace and aborted it.
    expect(500 + PROBE_GRACE_MS).toBeLessThan(10_000);
    expect(signal?.aborted).toBe(true);
    const c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c?.status).toBe('unhealthy');
    expect(c?.history).toHaveLength(1);
    expect(c?.lastResult?.timedOut).toBe(true);
    // When it finally settles its late result is not counted again, and probing goes on.
    env.exec.answerNext({ exitCode: 0 });
    await flush();
    expect(env.mgr.snapshot('nova_compute')?.checks[0]?.history).toHaveLength(1);
    env.clock.advance(1000);
    await flush();
    expect(env.exec.calls).toHaveLength(1);
  });

  it('publishes only when a status changes', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 2 })]));
    const initial = env.changes.length;
    for (let i = 0; i < 5; i++) await step(env, i === 0 ? 0 : 1000, { exitCode: 0 });
    expect(env.changes.length - initial).toBe(1); // starting -> healthy
    for (let i = 0; i < 5; i++) await step(env, 1000, { exitCode: 1 });
    expect(env.changes.length - initial).toBe(2); // healthy -> unhealthy
    const last = env.changes[env.changes.length - 1];
    expect(last).toMatchObject({
      status: 'unhealthy',
      previous: 'healthy',
      check: { name: 'c1', status: 'unhealthy', previous: 'healthy' },
    });
    expect(env.mgr.snapshot('nova_compute')?.checks[0]?.history).toHaveLength(10);
  });

  it('keeps historySize results', async () => {
    const env = setup({ historySize: 3 });
    env.mgr.watch(target([check()]));
    for (let i = 0; i < 5; i++) await step(env, i === 0 ? 0 : 1000, { exitCode: i, output: `run ${i}` });
    const h = env.mgr.snapshot('nova_compute')?.checks[0]?.history ?? [];
    expect(h.map((r) => r.output)).toEqual(['run 2', 'run 3', 'run 4']);
    expect(h[2]).toMatchObject({ exitCode: 4, ok: false, durationMs: 1, timedOut: false });
  });

  it('stores container output with its control characters escaped (no ANSI or CR reaches status or a terminal)', async () => {
    const env = setup();
    env.mgr.watch(target([check()]));
    await step(env, 0, { exitCode: 1, output: 'bad\x1b[2J\rspcd: healthy\nsecond\tline\u009b' });
    const h = env.mgr.snapshot('nova_compute')?.checks[0]?.history ?? [];
    expect(h.map((r) => r.output)).toEqual(['bad\\x1b[2J\\rspcd: healthy\nsecond\tline\\x9b']);
  });

  it('does not probe a paused container, discards its in-flight result, and resumes', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 1 })]));
    env.clock.advance(0);
    await flush();
    const inflight = env.exec.calls[0];
    env.mgr.pause('nova_compute');
    expect(inflight?.req.signal?.aborted).toBe(true);
    env.exec.answerNext({ exitCode: 1 });
    await flush();
    for (let i = 0; i < 5; i++) {
      env.clock.advance(1000);
      await flush();
    }
    expect(env.exec.calls).toHaveLength(0);
    let snap = env.mgr.snapshot('nova_compute');
    expect(snap?.paused).toBe(true);
    expect(snap?.checks[0]?.history).toHaveLength(0);
    expect(snap?.status).toBe('starting');
    // A new instance watched while paused stays paused until resume.
    env.mgr.watch(target([check({ failureThreshold: 1 })], { containerId: 'newid' }));
    env.clock.advance(5000);
    await flush();
    expect(env.exec.calls).toHaveLength(0);
    env.mgr.resume('nova_compute');
    env.clock.advance(0);
    await flush();
    expect(env.exec.calls.map((c) => c.containerId)).toEqual(['newid']);
    env.exec.answerNext({ exitCode: 0 });
    await flush();
    snap = env.mgr.snapshot('nova_compute');
    expect(snap?.status).toBe('healthy');
    expect(snap?.paused).toBe(false);
  });

  it('replaces the workers of an old instance; its late results are dropped', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 1 })]));
    env.clock.advance(0);
    await flush();
    env.mgr.watch(target([check({ failureThreshold: 1 })], { containerId: 'second' }));
    env.exec.answerNext({ exitCode: 1 }); // the old instance's probe
    await flush();
    expect(env.actions).toHaveLength(0);
    expect(env.mgr.snapshot('nova_compute')).toMatchObject({ containerId: 'second', status: 'starting' });
    env.clock.advance(0);
    await flush();
    expect(env.exec.calls.map((c) => c.containerId)).toEqual(['second']);
  });

  it('records engine errors without counting them', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 1 })]));
    await step(env, 0, new SpcdError('ENGINE_UNAVAILABLE', 'connect ECONNREFUSED'));
    const c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c).toMatchObject({ status: 'starting', consecutiveFailures: 0 });
    expect(c?.lastResult).toMatchObject({ counted: false, error: 'ENGINE_UNAVAILABLE' });
    expect(env.actions).toHaveLength(0);
    expect(env.failures).toEqual([]);
  });

  it('reports dockerHealth beside spcd checks and publishes its changes', () => {
    const env = setup();
    env.mgr.watch(target([], { dockerHealth: 'starting' }));
    expect(env.mgr.snapshot('nova_compute')).toMatchObject({ status: 'unknown', dockerHealth: 'starting' });
    const n = env.changes.length;
    env.mgr.update('nova_compute', { dockerHealth: 'starting' });
    expect(env.changes.length).toBe(n);
    env.mgr.update('nova_compute', { containerId: 'c0ffee', dockerHealth: 'healthy' });
    expect(env.changes.length).toBe(n + 1);
    expect(env.mgr.snapshot('nova_compute')?.dockerHealth).toBe('healthy');
  });

  it('leaves a host-network-only probe on a bridged container unknown, with the reason', () => {
    const env = setup();
    env.mgr.watch(target([check({ probe: { kind: 'tcp', host: '127.0.0.1', port: 5672 } })]));
    env.clock.advance(10_000);
    const c = env.mgr.snapshot('nova_compute')?.checks[0];
    expect(c?.status).toBe('unknown');
    expect(c?.lastResult?.output).toMatch(/network "host"/);
  });

  it('runs host-side probes with no exec', async () => {
    const seen: string[] = [];
    const ok = (what: string): Promise<ProbeOutcome> => {
      seen.push(what);
      return Promise.resolve({ ok: true, exitCode: null, timedOut: false, output: what });
    };
    const hostProbes: HostProbes = {
      tcp: (h, p) => ok(`tcp ${h}:${p}`),
      http: (u) => ok(`http ${u}`),
      process: (comm, t) => ok(`process ${comm} ${t.pid}`),
      established: (name, ports, t) => ok(`established ${name} ${ports.join(',')} ${t.pid}`),
    };
    const env = setup({ hostProbes });
    env.mgr.watch(
      target(
        [
          check({ name: 't', probe: { kind: 'tcp', host: '127.0.0.1', port: 5672 } }),
          check({ name: 'h', probe: { kind: 'http', url: 'http://127.0.0.1:8774/', expectStatus: [] } }),
          check({ name: 'p', probe: { kind: 'process', comm: 'nova-compute' } }),
          check({ name: 'e', probe: { kind: 'established', process: 'nova-compute', ports: [5672] } }),
        ],
        { network: 'host' },
      ),
    );
    env.clock.advance(0);
    await flush();
    expect(seen.sort()).toEqual([
      'established nova-compute 5672 1234',
      'http http://127.0.0.1:8774/',
      'process nova-compute 1234',
      'tcp 127.0.0.1:5672',
    ]);
    expect(env.exec.calls).toHaveLength(0);
    expect(env.mgr.snapshot('nova_compute')?.status).toBe('healthy');
  });
});

describe('established checks pick host-side or exec', () => {
  const established = check({
    name: 'amqp',
    probe: { kind: 'established', process: 'nova-compute', ports: [5671, 5672] },
  });
  const seen: string[] = [];
  const hostProbes: HostProbes = {
    tcp: () => Promise.reject(new Error('unused')),
    http: () => Promise.reject(new Error('unused')),
    process: () => Promise.reject(new Error('unused')),
    established: (name) => {
      seen.push(name);
      return Promise.resolve({ ok: true, exitCode: null, timedOut: false, output: 'from /proc' });
    },
  };

  it.each([
    ['host network', { network: 'host' }],
    ['host pid', { pidMode: 'host' as const }],
  ])('reads /proc from the host for a container sharing the %s namespace', async (_what, opts) => {
    seen.length = 0;
    const env = setup({ hostProbes });
    env.mgr.watch(target([established], opts));
    env.clock.advance(0);
    await flush();
    expect(seen).toEqual(['nova-compute']);
    expect(env.exec.calls).toHaveLength(0);
  });

  it("execs the shipped healthcheck_port in a container with its own namespaces, Kolla's argument order", async () => {
    seen.length = 0;
    const env = setup({ hostProbes });
    env.mgr.watch(target([established], { network: 'bridge', pidMode: 'private' }));
    env.clock.advance(0);
    await flush();
    expect(seen).toEqual([]);
    expect(env.exec.calls.map((c) => c.req.argv)).toEqual([
      ['/spcd/healthchecks/healthcheck_port', 'nova-compute', '5671', '5672'],
    ]);
  });
});

describe('waitHealthy', () => {
  it('resolves at once for a container without checks', async () => {
    const env = setup();
    env.mgr.watch(target([]));
    await expect(
      env.mgr.waitHealthy('nova_compute', 'c0ffee', env.clock.now() + 1000),
    ).resolves.toBeUndefined();
  });

  it('waits for that instance to be watched and healthy', async () => {
    const env = setup();
    let done = false;
    const p = env.mgr.waitHealthy('nova_compute', 'new', env.clock.now() + 60_000).then(() => (done = true));
    env.mgr.watch(target([check()], { containerId: 'old' }));
    await step(env, 0, { exitCode: 0 });
    expect(done).toBe(false);
    env.mgr.watch(target([check({ name: 'a' }), check({ name: 'b' })], { containerId: 'new' }));
    env.clock.advance(0);
    await flush();
    env.exec.answerNext({ exitCode: 0 });
    await flush();
    expect(done).toBe(false);
    env.exec.answerNext({ exitCode: 0 });
    await p;
    expect(done).toBe(true);
  });

  it('rejects with HEALTH_GATE_FAILED and the last results at the deadline', async () => {
    const env = setup();
    env.mgr.watch(target([check({ startPeriodMs: 60_000 })], { startedAtMs: env.clock.now() }));
    const p = env.mgr.waitHealthy('nova_compute', 'c0ffee', env.clock.now() + 3000);
    const caught = p.catch((e: unknown) => e);
    await step(env, 0, { exitCode: 1, output: 'not yet' });
    env.clock.advance(3000);
    const err = await caught;
    expect(isSpcdError(err, 'HEALTH_GATE_FAILED')).toBe(true);
    const details = (err as SpcdError).details as {
      lastResults: { check: string; lastResult: { output: string } }[];
    };
    expect(details.lastResults[0]).toMatchObject({ check: 'c1', lastResult: { output: 'not yet' } });
  });

  it('rejects early when a check turns unhealthy, and on abort', async () => {
    const env = setup();
    env.mgr.watch(target([check({ failureThreshold: 1 })]));
    const caught = env.mgr
      .waitHealthy('nova_compute', 'c0ffee', env.clock.now() + 60_000)
      .catch((e: unknown) => e);
    await step(env, 0, { exitCode: 1 });
    expect(isSpcdError(await caught, 'HEALTH_GATE_FAILED')).toBe(true);

    const ac = new AbortController();
    const env2 = setup();
    env2.mgr.watch(target([check()]));
    const p2 = env2.mgr
      .waitHealthy('nova_compute', 'c0ffee', env2.clock.now() + 60_000, ac.signal)
      .catch((e: unknown) => e);
    ac.abort();
    expect(isSpcdError(await p2, 'HEALTH_GATE_FAILED')).toBe(true);
  });
});

describe('close', () => {
  it('stops workers, cancels timers and aborts in-flight probes', async () => {
    const env = setup();
    env.mgr.watch(
      target([
        check({ name: 'a' }),
        check({ name: 'b', schedule: { kind: 'cron', expression: '*/5 * * * * *' } }),
      ]),
    );
    env.clock.advance(0);
    await flush();
    const inflight = env.exec.calls[0];
    const closing = env.mgr.close();
    expect(inflight?.req.signal?.aborted).toBe(true);
    env.exec.answerNext(new SpcdError('ENGINE_TIMEOUT', 'aborted'));
    await closing;
    expect(env.clock.pending()).toBe(0);
    expect(env.mgr.snapshot('nova_compute')).toBeUndefined();
    expect(() => env.mgr.watch(target([check()]))).toThrow(SpcdError);
  });
});

describe('cron schedule', () => {
  it('runs a check at each match of its expression on the injected clock', async () => {
    const env = setup();
    // Align the fake clock to a local minute boundary + 1 s.
    const base = new Date(2025, 0, 1, 10, 0, 1).getTime();
    env.clock.advance(base - env.clock.now());
    env.mgr.watch(target([check({ schedule: { kind: 'cron', expression: '*/5 * * * * *' } })]));
    const at: number[] = [];
    for (let i = 0; i < 40; i++) {
      env.clock.advance(500);
      await flush();
      while (env.exec.calls.length) {
        at.push(env.clock.now() - base);
        env.exec.answerNext({ exitCode: 0 });
        await flush();
      }
    }
    // Matches at :05, :10, :15, :20 => 4 s, 9 s, 14 s, 19 s after base.
    expect(at).toEqual([4000, 9000, 14000, 19000]);
    await env.mgr.close();
  });

  it('computes next matches for minute, hourly and last-day expressions', () => {
    const next = (expr: string, from: Date): Date => {
      const t = cron.createTask(expr, () => undefined);
      try {
        return new Date(nextCronMatch(cron.parse(expr), (d) => t.match(d), from.getTime()));
      } finally {
        void t.destroy();
      }
    };
    expect(next('*/15 * * * *', new Date(2025, 0, 1, 10, 7, 30))).toEqual(new Date(2025, 0, 1, 10, 15, 0));
    expect(next('0 3 * * *', new Date(2025, 0, 1, 10, 7, 30))).toEqual(new Date(2025, 0, 2, 3, 0, 0));
    expect(next('0 0 12 L * *', new Date(2025, 1, 3))).toEqual(new Date(2025, 1, 28, 12, 0, 0));
    expect(next('0 0 * * 1', new Date(2025, 0, 1))).toEqual(new Date(2025, 0, 6, 0, 0, 0)); // a Monday
  });
});
