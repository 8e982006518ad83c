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
/** How long we wait for a timed-out exec that has not started yet to show its PID. */
const START_WAIT_MS = 3_000;
/** How long runExec waits for the kill before it resolves a timed-out result anyway. */
const KILL_WAIT_MS = 1_000;

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

function deadlineSignal(ms: number): AbortSignal {
  return AbortSignal.timeout(ms);
}

/**
 * A deadline that can be disarmed: the attach stream of exec start outlives
 * its request, and a late abort must not tear down a healthy long check.
 */
function disarmableDeadline(ms: number): { signal: AbortSignal; disarm: () => void } {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), ms);
  return { signal: ctl.signal, disarm: () => clearTimeout(t) };
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
  // When the deadline passes early the exec may not have started yet (Pid 0,
  // no ExitCode): poll until it has a PID or an exit code, within a bound.
  const until = Date.now() + START_WAIT_MS;
  for (;;) {
    const info = (await exec.inspect({ abortSignal: deadlineSignal(2_000) })) as {
      Pid?: number;
      Running?: boolean;
      ExitCode?: number | null;
      ContainerID?: string;
    };
    pid = info.Pid ?? 0;
    if (info.ContainerID) fullId = info.ContainerID;
    if (pid > 0 && info.Running !== false) break;
    if (typeof info.ExitCode === 'number') return { pid, killed: 0, gone: true };
    if (Date.now() > until) {
      log.warn({ containerId, execId: exec.id }, 'timed-out exec never showed a PID');
      return { pid: 0, killed: 0, gone: false };
    }
    await sleep(20);
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
  const verifyUntil = Date.now() + VERIFY_GONE_MS;
  let gone = tree.every(isGone);
  while (!gone && Date.now() < verifyUntil) {
    await sleep(10);
    gone = tree.every(isGone);
  }
  return { pid, killed, gone };
}

/** Reads the demultiplexed stream into the tail until it ends or `stop` aborts. */
function drain(stream: Duplex, tail: TailBuffer, stop: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const feed = demux((b) => tail.push(b));
    const done = (): void => {
      stop.removeEventListener('abort', done);
      resolve();
    };
    stream.on('data', (c: Buffer) => feed(c));
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
    if (stop.aborted) done();
    else stop.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs argv in the container (no shell), keeping the tail of the combined
 * output. At the timeout it resolves {timedOut:true, exitCode:null} after
 * killing the exec's process tree from the host (waiting at most KILL_WAIT_MS
 * for that; the kill and its verification go on in the background if the
 * engine is slow). Rejects with a SpcdError when the engine refuses
 * (ENGINE_CONFLICT: container not running; ENGINE_NOT_FOUND) or when the
 * caller's signal aborts (after the same kill).
 */
export async function runExec(
  docker: Dockerode,
  containerId: string,
  req: ExecRequest,
  log: Logger,
): Promise<ExecResult> {
  const startedAt = Date.now();
  const tail = new TailBuffer(req.maxOutputBytes);
  const abortedByCaller = (): SpcdError =>
    isSpcdError(req.signal?.reason)
      ? req.signal.reason
      : new SpcdError('ENGINE_TIMEOUT', 'exec cancelled by its caller', { containerId, aborted: true });
  if (req.signal?.aborted) throw abortedByCaller();

  const cut = openCut(req);
  const { h, launched } = launch(docker, containerId, req);
  try {
    const first = await Promise.race([launched.then(() => 'launched' as const), cut.cutPromise]);
    const how =
      first === 'cut'
        ? 'cut'
        : await Promise.race([
            drain(h.stream as Duplex, tail, cut.signal).then(() => (cut.signal.aborted ? 'cut' : 'ended')),
            cut.cutPromise,
          ]);

    if (how === 'cut') {
      await killWithin(launched, h, containerId, req, log);
      if (!cut.timedOut) throw abortedByCaller();
      return { exitCode: null, timedOut: true, output: tail.toString(), durationMs: Date.now() - startedAt };
    }
    const exitCode = await exitCodeOf(h.exec as Dockerode.Exec, containerId);
    return { exitCode, timedOut: false, output: tail.toString(), durationMs: Date.now() - startedAt };
  } finally {
    cut.dispose();
    if (!cut.signal.aborted) h.stream?.destroy();
  }
}

/** `signal` aborts at the timeout (then `timedOut`) or on the caller's abort; `cutPromise` resolves then. */
interface Cut {
  readonly signal: AbortSignal;
  readonly timedOut: boolean;
  readonly cutPromise: Promise<'cut'>;
  /** Clears the timer and the listeners. */
  dispose(): void;
}

function openCut(req: ExecRequest): Cut {
  // `cut` fires at the timeout or on the caller's abort.
  const cut = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    cut.abort();
  }, req.timeoutMs);
  const onOuterAbort = (): void => cut.abort();
  req.signal?.addEventListener('abort', onOuterAbort, { once: true });
  let cutPromiseCancel = (): void => undefined;
  const cutPromise = new Promise<'cut'>((resolve) => {
    const on = (): void => resolve('cut');
    cut.signal.addEventListener('abort', on, { once: true });
    cutPromiseCancel = () => cut.signal.removeEventListener('abort', on);
  });
  return {
    signal: cut.signal,
    get timedOut() {
      return timedOut;
    },
    cutPromise,
    dispose() {
      clearTimeout(timer);
      cutPromiseCancel();
      req.signal?.removeEventListener('abort', onOuterAbort);
    },
  };
}

/**
 * Creates and starts the exec. Create and start are not cancelled by the
 * cut: an exec created late is still started and then killed, so no exec is
 * ever left behind unstarted.
 */
function launch(
  docker: Dockerode,
  containerId: string,
  req: ExecRequest,
): { h: { exec?: Dockerode.Exec; stream?: Duplex }; launched: Promise<void> } {
  const h: { exec?: Dockerode.Exec; stream?: Duplex } = {};
  const launched = (async (): Promise<void> => {
    try {
      h.exec = await docker.getContainer(containerId).exec({
        Cmd: [...req.argv],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: false,
        Tty: false,
        abortSignal: deadlineSignal(CALL_DEADLINE_MS),
      } as Dockerode.ExecCreateOptions);
      const d = disarmableDeadline(CALL_DEADLINE_MS);
      try {
        h.stream = (await h.exec.start({ hijack: true, stdin: false, abortSignal: d.signal })) as Duplex;
      } finally {
        d.disarm();
      }
    } catch (err) {
      throw mapEngineError(err, `exec in ${containerId}`);
    }
  })();
  return { h, launched };
}

/** Kills the cut exec's process tree, waiting at most KILL_WAIT_MS (the rest goes on in the background). */
async function killWithin(
  launched: Promise<void>,
  h: { exec?: Dockerode.Exec; stream?: Duplex },
  containerId: string,
  req: ExecRequest,
  log: Logger,
): Promise<void> {
  const cleanup = (async (): Promise<void> => {
    try {
      await launched;
    } catch {
      return; // never created or started: nothing runs
    }
    h.stream?.destroy();
    const o = await killExec(h.exec as Dockerode.Exec, containerId, log).catch((err: unknown) =>
      mapEngineError(err, 'exec kill'),
    );
    if (o instanceof Error || !o.gone) {
      log.error({ containerId, argv: req.argv, outcome: o }, 'timed-out exec could not be verified killed');
    } else {
      log.debug({ containerId, argv: req.argv, ...o }, 'timed-out exec killed');
    }
  })();
  let cancelWait = (): void => undefined;
  await Promise.race([
    cleanup,
    new Promise<void>((r) => {
      const t = setTimeout(r, KILL_WAIT_MS);
      cancelWait = () => clearTimeout(t);
    }),
  ]);
  cancelWait();
}

/**
 * The stream ended: read the exit code. Right after the end the engine
 * may still report Running for a moment, so poll briefly.
 */
async function exitCodeOf(exec: Dockerode.Exec, containerId: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    let info: { Running?: boolean; ExitCode?: number | null };
    try {
      info = (await exec.inspect({ abortSignal: deadlineSignal(CALL_DEADLINE_MS) })) as typeof info;
    } catch (err) {
      throw mapEngineError(err, `exec inspect in ${containerId}`);
    }
    if (!info.Running && typeof info.ExitCode === 'number') return info.ExitCode;
    await sleep(Math.min(5 * (i + 1), 50));
  }
  throw new SpcdError('ENGINE_FAILED', `exec in ${containerId}: no exit code after its output ended`, {
    containerId,
  });
}
