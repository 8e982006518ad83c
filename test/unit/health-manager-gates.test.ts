/** The health manager: established checks, waitHealthy, close, cron schedules. */
import { describe, expect, it } from 'vitest';
import { SpcdError, isSpcdError } from '../../agent/errors.js';
import { nextCronMatch } from '../../agent/health/schedule.js';
import type { HostProbes } from '../../agent/health/types.js';
import { check, flush, setup, step, target } from '../support/health-manager.js';
import cron from 'node-cron';

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
