/**
 * `docker exec` with a real timeout. The Docker API cannot kill an exec, so
 * when the deadline passes we read the exec's host PID from exec inspect and
 * SIGKILL it and its descendants from the host (spcd runs as root in the host
 * PID namespace), verify they are gone, and destroy the attach socket so no
 * file descriptor stays open. Engine errors are mapped by statusCode/errno.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Duplex } from 'node:stream';
import type Dockerode from 'dockerode';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { mapEngineError } from './map-error.js';
import type { ExecRequest, ExecResult } from './types.js';

/** Deadline for each small engine call made here (create, inspect). */
const CALL_DEADLINE_MS = 10_000;
/** How long we keep checking that a killed process is gone. */
const VERIFY_GONE_MS = 1_500;

/** Keeps the last `max` bytes of a byte stream. */
class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}

  push(b: Buffer): void {
    if (this.max <= 0 || b.length === 0) return;
    this.chunks.push(b);
    this.size += b.length;
    if (this.size > 2 * this.max) this.compact();
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const tail = all.subarray(Math.max(0, all.length - this.max));
    this.chunks = [Buffer.from(tail)];
    this.size = tail.length;
  }

  toString(): string {
    this.compact();
    return this.chunks[0]?.toString('utf8') ?? '';
  }
}

/** Demultiplexes Docker's 8-byte-header stdout/stderr framing into one sink. */
function demux(sink: (b: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 8) {
      const len = pending.readUInt32BE(4);
      if (pending.length < 8 + len) break;
      sink(pending.subarray(8, 8 + len));
      pending = pending.subarray(8 + len);
    }
  };
}

function deadlineSignal(ms: number, outer?: AbortSignal): AbortSignal {
  const t = AbortSignal.timeout(ms);
  return outer ? AbortSignal.any([t, outer]) : t;
}

/** PID plus every descendant, found by a scan of /proc/<pid>/stat parent links. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const ent of readdirSync('/proc')) {
    const pid = Number(ent);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const ppid = readPpid(pid);
    if (ppid === undefined) continue;
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length) {
    const p = stack.pop() as number;
    out.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

function readStat(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
}

function readPpid(pid: number): number | undefined {
  const s = readStat(pid);
  if (!s) return undefined;
  // comm may hold spaces and parentheses: fields start after the last ')'.
  const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return Number(rest[1]);
}

/** True when the PID is gone or a zombie (killed, waiting for its reaper). */
export function isGone(pid: number): boolean {
  const s = readStat(pid);
  if (!s) return true;
  const state = s.slice(s.lastIndexOf(')') + 2, s.lastIndexOf(')') + 3);
  return state === 'Z' || state === 'X';
}

/** Does /proc/<pid>/cgroup name this container? Guards against PID reuse. */
function inContainerCgroup(pid: number, containerId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(containerId);
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface KillOutcome {
  pid: number;
  killed: number;
  gone: boolean;
}

/**
 * Finds the exec's host PID and SIGKILLs its process tree; waits (bounded)
 * until every killed PID is gone or a zombie.
 */
async function killExec(exec: Dockerode.Exec, containerId: string, log: Logger): Promise<KillOutcome> {
  let pid = 0;
  let fullId = containerId;
  // The exec may not have started yet when the deadline passes: retry briefly.
  for (let i = 0; i < 10 && pid === 0; i++) {
    const info = (await exec.inspect({ abortSignal: deadlineSignal(2_000) })) as {
      Pid?: number;
      Running?: boolean;
      ContainerID?: string;
    };
    pid = info.Pid ?? 0;
    if (info.ContainerID) fullId = info.ContainerID;
    if (pid === 0 && info.Running === false && i > 0) break;
    if (pid === 0) await sleep(20);
  }
  if (pid <= 0) return { pid: 0, killed: 0, gone: true };
  if (!inContainerCgroup(pid, fullId)) {
    // Gone already, or the PID now belongs to someone else: kill nothing.
    return { pid, killed: 0, gone: isGone(pid) };
  }
  const tree = processTree(pid);
  // Stop the root first so it cannot fork new children, then the rest.
  let killed = 0;
  for (const p of tree) {
    try {
      process.kill(p, 'SIGKILL');
      killed++;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') log.warn({ err, pid: p }, 'exec kill failed');
    }
  }
  // A second pass catches children forked between the scan and the root's kill.
  for (const p of processTree(pid))
    if (!tree.includes(p)) {
      try {
        process.kill(p, 'SIGKILL');
        killed++;
      } catch {
        /* gone */
      }
    }
  const until = Date.now() + VERIFY_GONE_MS;
  let gone = tree.every(isGone);
  while (!gone && Date.now() < until) {
    await sleep(10);
    gone = tree.every(isGone);
  }
  return { pid, killed, gone };
}

/**
 * Runs argv in the container (no shell), keeping the tail of the combined
 * output. Resolves {timedOut:true, exitCode:null} once the deadline passes and
 * the process was killed. Rejects with a SpcdError when the engine refuses
 * (ENGINE_CONFLICT: container not running) or the caller's signal aborts.
 */
export async function runExec(
  docker: Dockerode,
  containerId: string,
  req: ExecRequest,
  log: Logger,
): Promise<ExecResult> {
  const started = Date.now();
  const tail = new TailBuffer(req.maxOutputBytes);
  const abortedByCaller = (): SpcdError =>
    isSpcdError(req.signal?.reason)
      ? req.signal.reason
      : new SpcdError('ENGINE_TIMEOUT', 'exec cancelled by its caller', { containerId, aborted: true });
  if (req.signal?.aborted) throw abortedByCaller();

  // One controller for the whole call: it fires at the timeout or on the caller's abort.
  const deadline = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    deadline.abort();
  }, req.timeoutMs);
  const onOuterAbort = (): void => deadline.abort();
  req.signal?.addEventListener('abort', onOuterAbort, { once: true });

  let exec: Dockerode.Exec | undefined;
  let stream: Duplex | undefined;
  try {
    const container = docker.getContainer(containerId);
    try {
      exec = await container.exec({
        Cmd: [...req.argv],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: false,
        Tty: false,
        abortSignal: AbortSignal.any([deadline.signal, AbortSignal.timeout(CALL_DEADLINE_MS)]),
      } as Dockerode.ExecCreateOptions);
      stream = (await exec.start({ hijack: true, stdin: false, abortSignal: deadline.signal })) as Duplex;
    } catch (err) {
      if (!deadline.signal.aborted) throw mapEngineError(err, `exec in ${containerId}`);
    }

    if (stream && !deadline.signal.aborted) {
      const s = stream;
      const feed = demux((b) => tail.push(b));
      await new Promise<void>((resolve) => {
        const done = (): void => {
          deadline.signal.removeEventListener('abort', done);
          resolve();
        };
        s.on('data', (c: Buffer) => feed(c));
        s.once('end', done);
        s.once('close', done);
        s.once('error', done);
        deadline.signal.addEventListener('abort', done, { once: true });
      });
    }

    if (deadline.signal.aborted) {
      // Timed out or cancelled: the process may still run in the container.
      const outcome: KillOutcome | Error | undefined = exec
        ? await killExec(exec, containerId, log).catch((err: unknown) => mapEngineError(err, 'exec kill'))
        : undefined;
      if (outcome instanceof Error || (outcome && !outcome.gone)) {
        log.error({ containerId, argv: req.argv, outcome }, 'timed-out exec could not be verified killed');
      } else if (outcome) {
        log.debug({ containerId, argv: req.argv, ...outcome }, 'timed-out exec killed');
      }
      if (!timedOut) throw abortedByCaller();
      return { exitCode: null, timedOut: true, output: tail.toString(), durationMs: Date.now() - started };
    }

    // Finished: read the exit code. Right after the stream ends the engine may
    // still report Running for a moment, so poll briefly within the deadline.
    let exitCode: number | null = null;
    for (let i = 0; i < 50; i++) {
      let info: { Running?: boolean; ExitCode?: number | null };
      try {
        info = (await exec!.inspect({ abortSignal: deadlineSignal(CALL_DEADLINE_MS, deadline.signal) })) as {
          Running?: boolean;
          ExitCode?: number | null;
        };
      } catch (err) {
        if (deadline.signal.aborted) break;
        throw mapEngineError(err, `exec inspect in ${containerId}`);
      }
      if (!info.Running && typeof info.ExitCode === 'number') {
        exitCode = info.ExitCode;
        break;
      }
      await sleep(Math.min(5 * (i + 1), 50));
    }
    if (exitCode === null) {
      // The deadline passed while waiting for the exit code: treat as a timeout.
      if (!timedOut && req.signal?.aborted) throw abortedByCaller();
      return { exitCode: null, timedOut: true, output: tail.toString(), durationMs: Date.now() - started };
    }
    return { exitCode, timedOut: false, output: tail.toString(), durationMs: Date.now() - started };
  } finally {
    clearTimeout(timer);
    req.signal?.removeEventListener('abort', onOuterAbort);
    stream?.destroy();
  }
}
