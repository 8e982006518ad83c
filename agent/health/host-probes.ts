/**
 * Probes spcd runs itself from the host, with no exec: the cheap option for
 * containers that share the host network (tcp, http) and for process checks
 * (spcd sees every process in the host PID namespace). Each honors its timeout.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { findEstablished, findProcess, type ProcTarget } from './proc.js';
import type { HostProbes, ProbeOutcome } from './types.js';

export { findProcess };

function outcome(ok: boolean, output: string, started: number, timedOut = false): ProbeOutcome {
  return { ok, exitCode: null, timedOut, output, durationMs: Date.now() - started };
}

/**
 * Runs one probe under its timeout and the caller's signal, settling once:
 * `run` starts the work, reports through `finish`, and returns what tears it down.
 */
function bounded(
  what: string,
  timeoutMs: number,
  idle: string,
  signal: AbortSignal,
  run: (finish: (o: ProbeOutcome) => void, started: number) => () => void,
): Promise<ProbeOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    let settled = false;
    // Known only once run() returns; finish() may come later (or at once).
    const work: { teardown?: () => void } = {};
    const finish = (o: ProbeOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      work.teardown?.();
      resolve(o);
    };
    const timer = setTimeout(
      () => finish(outcome(false, `${what}: ${idle} within ${timeoutMs} ms`, started, true)),
      timeoutMs,
    );
    const onAbort = (): void => finish(outcome(false, `${what}: cancelled`, started));
    signal.addEventListener('abort', onAbort, { once: true });
    work.teardown = run(finish, started);
    if (settled) work.teardown();
  });
}

export function tcpProbe(
  host: string,
  port: number,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const what = `tcp ${host}:${port}`;
  return bounded(what, timeoutMs, 'no connection', signal, (finish, started) => {
    const sock = net.connect({ host, port });
    sock.once('connect', () => finish(outcome(true, `${what}: connected`, started)));
    sock.once('error', (err: NodeJS.ErrnoException) =>
      finish(outcome(false, `${what}: ${err.code ?? err.message}`, started)),
    );
    return () => sock.destroy();
  });
}

export function httpProbe(
  url: string,
  expectStatus: readonly number[],
  timeoutMs: number,
  maxOutputBytes: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  return bounded(`GET ${url}`, timeoutMs, 'no answer', signal, (finish, started) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(
      url,
      { agent: false, headers: { 'user-agent': 'spcd-health', connection: 'close' } },
      (res) => {
        const status = res.statusCode ?? 0;
        const ok = expectStatus.length ? expectStatus.includes(status) : status >= 200 && status < 400;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body = (body + c).slice(-Math.max(0, maxOutputBytes));
        });
        res.once('end', () =>
          finish(outcome(ok, `HTTP ${status}${body ? `: ${body.trim()}` : ''}`, started)),
        );
        res.once('error', () => finish(outcome(ok, `HTTP ${status}`, started)));
      },
    );
    req.once('error', (err: NodeJS.ErrnoException) =>
      finish(outcome(false, `GET ${url}: ${err.code ?? err.message}`, started)),
    );
    return () => req.destroy();
  });
}

export async function processProbe(
  comm: string,
  target: ProcTarget,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const started = Date.now();
  if (signal.aborted) return outcome(false, `process ${comm}: cancelled`, started);
  // Reads of /proc do not block on the network; the scan is synchronous and short.
  const pid = findProcess(comm, target);
  const took = Date.now() - started;
  if (took > timeoutMs) return outcome(false, `process ${comm}: scan took ${took} ms`, started, true);
  return pid !== undefined
    ? outcome(true, `process ${comm} alive (pid ${pid})`, started)
    : outcome(false, `no process ${comm} in container`, started);
}

/**
 * Kolla's healthcheck_port meaning, from the host's /proc: a process of the
 * container named `name` has an ESTABLISHED TCP connection on one of `ports`.
 */
export async function establishedProbe(
  name: string,
  ports: readonly number[],
  target: ProcTarget,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const started = Date.now();
  const what = `${name} tcp port ${ports.join('|')}`;
  if (signal.aborted) return outcome(false, `${what}: cancelled`, started);
  const found = findEstablished(name, ports, target);
  const took = Date.now() - started;
  if (took > timeoutMs) return outcome(false, `${what}: scan took ${took} ms`, started, true);
  if (found.connection) {
    const c = found.connection;
    return outcome(
      true,
      `${name} (pid ${c.pid}) has an established connection ${c.local} -> ${c.remote}`,
      started,
    );
  }
  if (found.pids.length === 0) return outcome(false, `no process ${name} in container`, started);
  return outcome(
    false,
    `${name} (pid ${found.pids.join(', ')}) has no established tcp connection on port ${ports.join(' or ')}`,
    started,
  );
}

export const realHostProbes: HostProbes = {
  tcp: tcpProbe,
  http: httpProbe,
  process: processProbe,
  established: establishedProbe,
};
