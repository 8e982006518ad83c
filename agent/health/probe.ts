/** Turns a check's probe definition into a function the worker calls each step. */
import { isSpcdError } from '../errors.js';
import type { ExecEngine } from '../engine/types.js';
import { establishedArgv, establishedRunsOnHost, type CheckSpec } from '../model/spec.js';
import type { HostProbes, ProbeFn, ProbeOutcome, WatchTarget } from './types.js';

/** Why a host-side probe cannot run for this container, or undefined when it can. */
export function hostProbeProblem(check: CheckSpec, target: WatchTarget): string | undefined {
  const p = check.probe;
  if ((p.kind === 'tcp' || p.kind === 'http') && target.network !== 'host') {
    return `${p.kind} probe of check ${check.name} runs from the host and needs network "host" (container has "${target.network}")`;
  }
  return undefined;
}

export function makeProbe(
  check: CheckSpec,
  target: WatchTarget,
  exec: ExecEngine,
  host: HostProbes,
): ProbeFn {
  const p = check.probe;
  const execProbe =
    (argv: readonly string[]): ProbeFn =>
    async (signal) => {
      try {
        const r = await exec.exec(target.containerId, {
          argv,
          timeoutMs: check.timeoutMs,
          maxOutputBytes: check.maxOutputBytes,
          signal,
        });
        return { ok: !r.timedOut && r.exitCode === 0, ...r };
      } catch (err) {
        // The probe could not run (engine down, container gone): not the check's verdict.
        const code = isSpcdError(err) ? err.code : 'INTERNAL';
        const message = err instanceof Error ? err.message : String(err);
        const o: ProbeOutcome = {
          ok: false,
          exitCode: null,
          timedOut: false,
          output: message,
          inconclusive: code,
        };
        return o;
      }
    };
  switch (p.kind) {
    case 'exec':
      return execProbe(p.argv);
    case 'tcp':
      return (signal) => host.tcp(p.host, p.port, check.timeoutMs, signal);
    case 'http':
      return (signal) => host.http(p.url, p.expectStatus, check.timeoutMs, check.maxOutputBytes, signal);
    case 'process':
      return (signal) => host.process(p.comm, target, check.timeoutMs, signal);
    case 'established':
      return establishedRunsOnHost({ pid: target.pidMode, network: target.network })
        ? (signal) => host.established(p.process, p.ports, target, check.timeoutMs, signal)
        : execProbe(establishedArgv(p.process, p.ports));
  }
}
