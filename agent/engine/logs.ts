import { PassThrough } from 'node:stream';
import type Dockerode from 'dockerode';
import { DEADLINES } from './deadlines.js';
import { withDeadline } from './map-error.js';

/** Streams a container's stdout+stderr as lines. Returns a function that stops it. */
export async function streamLogs(
  docker: Dockerode,
  id: string,
  o: { tail: number; follow: boolean; onLine: (line: string) => void; onEnd: () => void },
): Promise<() => void> {
  const container = docker.getContainer(id);
  const raw = (await withDeadline(`logs ${id.slice(0, 12)}`, DEADLINES.logsOpen, undefined, (abortSignal) =>
    container.logs({
      follow: o.follow as true,
      stdout: true,
      stderr: true,
      tail: o.tail,
      abortSignal,
    } as Dockerode.ContainerLogsOptions & { follow: true }),
  )) as unknown;
  const out = new PassThrough();
  let buf = '';
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    if (buf) o.onLine(buf);
    buf = '';
    o.onEnd();
  };
  out.on('data', (chunk: Buffer) => {
    buf += chunk.toString('utf8');
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      o.onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
  if (Buffer.isBuffer(raw)) {
    // Not following: the engine answered with the whole (multiplexed) body.
    demuxBuffer(raw, (b) => out.write(b));
    out.end();
    out.on('end', end);
    return () => end();
  }
  const stream = raw as NodeJS.ReadableStream & { destroy: () => void };
  docker.modem.demuxStream(stream, out, out);
  stream.on('end', end);
  stream.on('close', end);
  stream.on('error', end);
  return () => {
    stream.destroy();
    end();
  };
}

/** Docker's 8-byte-header stream framing, for a body that arrived whole. */
function demuxBuffer(buf: Buffer, write: (b: Buffer) => void): void {
  let i = 0;
  while (i + 8 <= buf.length) {
    const len = buf.readUInt32BE(i + 4);
    write(buf.subarray(i + 8, i + 8 + len));
    i += 8 + len;
  }
  if (i === 0 && buf.length > 0) write(buf); // a TTY container's logs are not framed
}
