/**
 * Probes spcd runs itself from the host, with no exec: the cheap option for
 * containers that share the host network (tcp, http) and for process checks
 * (spcd sees every process in the host PID namespace). Each honors its timeout.
 */
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { HostProbes, ProbeOutcome } from './types.js';

function outcome(ok: boolean, output: string, started: number, timedOut = false): ProbeOutcome {
  return { ok, exitCode: null, timedOut, output, durationMs: Date.now() - started };
}

export function tcpProbe(
  host: string,
  port: number,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    let settled = false;
    const finish = (o: ProbeOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      sock.destroy();
      resolve(o);
    };
    const timer = setTimeout(
      () =>
        finish(outcome(false, `tcp ${host}:${port}: no connection within ${timeoutMs} ms`, started, true)),
      timeoutMs,
    );
    const onAbort = (): void => finish(outcome(false, `tcp ${host}:${port}: cancelled`, started));
    signal.addEventListener('abort', onAbort, { once: true });
    sock.once('connect', () => finish(outcome(true, `tcp ${host}:${port}: connected`, started)));
    sock.once('error', (err: NodeJS.ErrnoException) =>
      finish(outcome(false, `tcp ${host}:${port}: ${err.code ?? err.message}`, started)),
    );
  });
}

export function httpProbe(
  url: string,
  expectStatus: readonly number[],
  timeoutMs: number,
  maxOutputBytes: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    let settled = false;
    const finish = (o: ProbeOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      req.destroy();
      resolve(o);
    };
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
    const timer = setTimeout(
      () => finish(outcome(false, `GET ${url}: no answer within ${timeoutMs} ms`, started, true)),
      timeoutMs,
    );
    const onAbort = (): void => finish(outcome(false, `GET ${url}: cancelled`, started));
    signal.addEventListener('abort', onAbort, { once: true });
    req.once('error', (err: NodeJS.ErrnoException) =>
      finish(outcome(false, `GET ${url}: ${err.code ?? err.message}`, started)),
    );
  });
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Descendants of pid (pid included), through /proc/<pid>/task/<tid>/children. */
function descendants(root: number, limit = 100_000): number[] {
  const out: number[] = [];
  const stack = [root];
  while (stack.length && out.length < limit) {
    const p = stack.pop() as number;
    out.push(p);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      const kids = read(`/proc/${p}/task/${t}/children`);
      if (kids) for (const k of kids.split(' ')) if (k.trim()) stack.push(Number(k));
    }
  }
  return out;
}

function commOf(pid: number): string | undefined {
  return read(`/proc/${pid}/comm`)?.trimEnd();
}

/**
 * A process whose comm is `comm` (compared on its first 15 bytes, as the
 * kernel truncates) runs in the container: first among the descendants of the
 * container's init PID, then (for daemons reparented out of that tree) among
 * every process whose cgroup names the container id.
 */
export function findProcess(comm: string, target: { containerId: string; pid: number }): number | undefined {
  const want = comm.slice(0, 15);
  if (target.pid > 0) {
    for (const p of descendants(target.pid)) if (commOf(p) === want) return p;
  }
  if (!target.containerId) return undefined;
  for (const ent of readdirSync('/proc')) {
    const pid = Number(ent);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    if (commOf(pid) !== want) continue;
    if (read(`/proc/${pid}/cgroup`)?.includes(target.containerId)) return pid;
  }
  return undefined;
}

export async function processProbe(
  comm: string,
  target: { containerId: string; pid: number },
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

export const realHostProbes: HostProbes = {
  tcp: tcpProbe,
  http: httpProbe,
  process: processProbe,
};
