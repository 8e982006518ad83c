import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import type { HostProbes, ProbeOutcome } from '../../agent/health/types.js';
import { PROBE_GRACE_MS } from '../../agent/health/worker.js';
import { check, flush, setup, step, target } from '../support/health-manager.js';

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
