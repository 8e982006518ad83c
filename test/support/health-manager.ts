import type { ExecEngine, ExecRequest, ExecResult } from '../../agent/engine/types.js';
import { HealthManager } from '../../agent/health/manager.js';
import type { HealthAction, HealthChange, HostProbes, WatchTarget } from '../../agent/health/types.js';
import { silentLogger } from '../../agent/log.js';
import type { CheckSpec } from '../../agent/model/spec.js';
import { FakeClock } from './fake-clock.js';

/** An exec engine whose calls wait until the test answers them. */
export class FakeExec implements ExecEngine {
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

export const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
};

export function check(o: Partial<CheckSpec> = {}): CheckSpec {
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

export function target(checks: CheckSpec[], o: Partial<WatchTarget> = {}): WatchTarget {
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

export function setup(opts: { random?: () => number; historySize?: number; hostProbes?: HostProbes } = {}) {
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
export async function step(
  env: ReturnType<typeof setup>,
  ms: number,
  r: Partial<ExecResult> | Error,
): Promise<void> {
  env.clock.advance(ms);
  await flush();
  env.exec.answerNext(r);
  await flush();
}
