/**
 * Plain containers for tests that exercise an image itself (no spcd): create
 * and start with a label, exec with its output and exit code, wait for an
 * exit, read logs, remove by id. Every call has a deadline.
 */
import { PassThrough } from 'node:stream';
import type Dockerode from 'dockerode';
import { docker } from './docker.js';

export interface ContainerSpec {
  readonly name: string;
  readonly image: string;
  readonly labels: Record<string, string>;
  readonly user?: string;
  readonly env?: string[];
  readonly binds?: string[];
  /** e.g. 'none' (own network namespace, loopback only) or 'container:<id>'. */
  readonly networkMode: string;
  readonly cmd?: string[];
  readonly entrypoint?: string[];
  /** Capabilities added to Docker's default set (e.g. NET_ADMIN). */
  readonly capAdd?: string[];
}

export interface ExecResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Rejects with `what` when `p` has not settled within `ms`. */
export function deadline<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Creates and starts a container; returns its id. */
export async function startContainer(spec: ContainerSpec, ms = 60_000): Promise<string> {
  const d = docker();
  const c = await deadline(
    `create ${spec.name}`,
    ms,
    d.createContainer({
      name: spec.name,
      Image: spec.image,
      Labels: spec.labels,
      User: spec.user,
      Env: spec.env,
      Cmd: spec.cmd,
      Entrypoint: spec.entrypoint,
      HostConfig: { NetworkMode: spec.networkMode, Binds: spec.binds, CapAdd: spec.capAdd },
    }),
  );
  await deadline(`start ${spec.name}`, ms, c.start());
  return c.id;
}

function collect(stream: NodeJS.ReadableStream, d: Dockerode): Promise<{ out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const out = new PassThrough();
    const err = new PassThrough();
    const o: Buffer[] = [];
    const e: Buffer[] = [];
    out.on('data', (b: Buffer) => o.push(b));
    err.on('data', (b: Buffer) => e.push(b));
    d.modem.demuxStream(stream, out, err);
    stream.on('end', () =>
      resolve({ out: Buffer.concat(o).toString('utf8'), err: Buffer.concat(e).toString('utf8') }),
    );
    stream.on('error', reject);
  });
}

/** Runs a command in a running container. */
export async function execIn(
  id: string,
  cmd: string[],
  opts: { user?: string; env?: string[]; timeoutMs?: number } = {},
): Promise<ExecResult> {
  const d = docker();
  const ms = opts.timeoutMs ?? 60_000;
  const what = `exec ${cmd.join(' ')} in ${id.slice(0, 12)}`;
  const ex = await deadline(
    what,
    ms,
    d.getContainer(id).exec({
      Cmd: cmd,
      AttachStdout: true,
      AttachStderr: true,
      User: opts.user,
      Env: opts.env,
    }),
  );
  const stream = await deadline(what, ms, ex.start({ hijack: true, stdin: false }));
  try {
    const { out, err } = await deadline(what, ms, collect(stream, d));
    const info = await deadline(what, ms, ex.inspect());
    return { exitCode: info.ExitCode ?? -1, stdout: out, stderr: err };
  } finally {
    (stream as unknown as { destroy?: () => void }).destroy?.();
  }
}

/** The container's stdout and stderr so far. */
export async function logsOf(id: string, ms = 30_000): Promise<string> {
  const c = docker().getContainer(id);
  const buf = (await deadline(
    `logs of ${id.slice(0, 12)}`,
    ms,
    c.logs({ stdout: true, stderr: true, follow: false }),
  )) as unknown as Buffer;
  // Non-TTY logs are framed: 8-byte headers (stream, 0, 0, 0, size32) then the payload.
  const parts: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buf.length) {
    const size = buf.readUInt32BE(i + 4);
    parts.push(buf.subarray(i + 8, i + 8 + size));
    i += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** Waits until the container exits; returns its exit code. */
export async function waitExit(id: string, ms: number): Promise<number> {
  const r = (await deadline(`wait for ${id.slice(0, 12)} to exit`, ms, docker().getContainer(id).wait())) as {
    StatusCode: number;
  };
  return r.StatusCode;
}

/** Removes the given containers (force), by id; ignores ones already gone. */
export async function removeById(ids: readonly string[], ms = 60_000): Promise<void> {
  const d = docker();
  await Promise.all(
    ids.map((id) =>
      deadline(`remove ${id.slice(0, 12)}`, ms, d.getContainer(id).remove({ force: true, v: true })).catch(
        () => undefined,
      ),
    ),
  );
}
