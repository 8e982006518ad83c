/**
 * Listening: the unix sockets (the admin one, the only way to drive spcd, and
 * the read-only one, both made here the same way) and, when asked, a
 * read-only TCP listener for GET /metrics.
 *
 * File permissions are the gate (SO_PEERCRED only names the caller in the
 * audit line, peer-cred.ts): each socket is bound under a temporary name
 * with umask 0177 (mode 0600, unreachable by anyone but us), then chowned to
 * (our uid, its group: admin or read-only) and chmodded 0660, and only then
 * hard-linked to the final path (link() fails if the path
 * exists, so two daemons cannot silently replace each other's socket).
 */
import { randomBytes } from 'node:crypto';
import { chmod, chown, link, lstat, mkdir, readFile, stat, unlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ApiHandler } from './handler.js';
import { guardConnections, type ConnectionCounts } from './connections.js';
import { sendError } from './http-out.js';
import { compileLimits, type ApiLimits } from './limits.js';

export interface ListenUnixOptions {
  readonly socketPath: string;
  /** Group (name or gid) that may use the socket (the admin or the read-only group); default: our own gid. */
  readonly group?: string | number;
  /** Socket file mode; default 0o660. */
  readonly mode?: number;
  /** Mode of the socket's directory when spcd creates it; default 0o750. */
  readonly dirMode?: number;
  readonly limits?: Partial<ApiLimits>;
  readonly log?: Logger;
}

export interface ApiServer {
  readonly socketPath: string;
  readonly server: Server;
  /** Open connection slots, and how many were evicted or refused at the cap. */
  connections(): ConnectionCounts;
  close(): Promise<void>;
}

export async function listenUnix(handler: ApiHandler, opts: ListenUnixOptions): Promise<ApiServer> {
  const limits = compileLimits(opts.limits);
  const mode = opts.mode ?? 0o660;
  const dirMode = opts.dirMode ?? 0o750;
  const uid = process.getuid?.() ?? 0;
  const gid = opts.group === undefined ? (process.getgid?.() ?? 0) : await resolveGroup(opts.group);
  const dir = dirname(opts.socketPath);

  await ensureDir(dir, dirMode, uid, gid);
  await clearStale(opts.socketPath);

  const { server, connections } = makeServer(handler, limits);
  const tmp = join(dir, `.spcd-${process.pid}-${randomBytes(4).toString('hex')}.sock`);
  await listenTight(server, tmp);
  try {
    await chown(tmp, uid, gid);
    await chmod(tmp, mode);
    try {
      await link(tmp, opts.socketPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // someone created the path since clearStale: check once more, then try again
      await clearStale(opts.socketPath);
      await link(tmp, opts.socketPath);
    }
  } catch (err) {
    await closeServer(server);
    await unlink(tmp).catch(() => undefined);
    if (err instanceof SpcdError) throw err;
    throw new SpcdError(
      'SETTINGS_INVALID',
      `cannot set up the API socket ${opts.socketPath}: ${(err as Error).message}`,
      {
        socketPath: opts.socketPath,
      },
    );
  }
  await unlink(tmp).catch(() => undefined);
  const ino = (await stat(opts.socketPath)).ino;
  opts.log?.info({ socketPath: opts.socketPath, mode: mode.toString(8), gid }, 'API listening');

  return {
    socketPath: opts.socketPath,
    server,
    connections,
    async close() {
      await closeServer(server);
      // remove the path only if it is still ours
      const now = await stat(opts.socketPath).catch(() => null);
      if (now && now.ino === ino) await unlink(opts.socketPath).catch(() => undefined);
    },
  };
}

/** A read-only TCP listener that serves GET /metrics and nothing else. */
export async function listenMetricsTcp(
  handler: ApiHandler,
  opts: { host: string; port: number; limits?: Partial<ApiLimits> },
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const limits = compileLimits(opts.limits);
  const metricsOnly: ApiHandler = (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') {
      sendError(res, new SpcdError('NOT_FOUND', 'this listener serves only GET /metrics', { path }), true);
    } else if (req.method !== 'GET') {
      sendError(res, new SpcdError('METHOD_NOT_ALLOWED', 'only GET /metrics', { allow: ['GET'] }), true);
    } else handler(req, res);
  };
  const { server } = makeServer(metricsOnly, limits);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return { server, port, close: () => closeServer(server) };
}

/** The HTTP server with our limits, and a live view of its connection slots. */
export function makeServer(
  handler: ApiHandler,
  limits: ApiLimits,
): { server: Server; connections: () => ConnectionCounts } {
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // timeouts are only checked this often: keep it finer than the smallest timeout
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
      keepAliveTimeout: 5_000,
      maxHeaderSize: 16 * 1024,
    },
    handler as (req: IncomingMessage, res: ServerResponse) => void,
  );
  // the cap is ours, not server.maxConnections: at the cap a new client takes a slow or idle client's slot
  const connections = guardConnections(server, {
    maxConnections: limits.maxConnections,
    graceMs: limits.connectionGraceMs,
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => answerClientError(err, socket));
  return { server, connections };
}

/** Node's parser rejected the request (bad request line, conflicting framing, timeouts): answer in our shape, close. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  let status = 400;
  const code = 'BAD_REQUEST';
  let message = 'malformed HTTP request';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'request headers too large';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'HPE_HEADERS_TIMEOUT') {
    status = 408;
    message = 'request not received in time';
  }
  const body = JSON.stringify({ code, message, details: { parser: err.code ?? null } });
  const reason =
    status === 408 ? 'Request Timeout' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

async function listenTight(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // bind() happens synchronously inside listen(); the umask makes the file 0600 from birth
    const old = process.umask(0o177);
    try {
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(old);
    }
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function ensureDir(dir: string, dirMode: number, uid: number, gid: number): Promise<void> {
  const st = await stat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (st) {
    if (!st.isDirectory()) throw new SpcdError('SETTINGS_INVALID', `${dir} is not a directory`, { dir });
    return; // an existing directory is the operator's: left as it is
  }
  // missing parents are made traversable (0755); only the socket's own directory is the gate
  await mkdir(dirname(dir), { recursive: true, mode: 0o755 });
  await mkdir(dir, { mode: dirMode });
  await chown(dir, uid, gid);
  await chmod(dir, dirMode); // mkdir's mode is filtered by the umask
}

/**
 * A socket file left by a crash: if connecting gets ECONNREFUSED nobody
 * listens, so it is removed; if something answers, another spcd owns it.
 * Anything but a socket at that path is never removed.
 */
export async function clearStale(path: string): Promise<void> {
  const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (!st) return;
  if (!st.isSocket()) {
    throw new SpcdError('SETTINGS_INVALID', `${path} exists and is not a socket; refusing to replace it`, {
      path,
    });
  }
  const answer = await probe(path);
  if (answer === 'listening') {
    throw new SpcdError('SOCKET_IN_USE', `another process already listens on ${path}`, { path });
  }
  if (answer === 'stale') await unlink(path).catch(() => undefined);
}

function probe(path: string): Promise<'listening' | 'stale' | 'gone'> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.setTimeout(2_000);
    s.once('connect', () => {
      s.destroy();
      resolve('listening');
    });
    s.once('timeout', () => {
      s.destroy();
      resolve('listening'); // a backlog full of connections is still a listener
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED') resolve('stale');
      else if (err.code === 'ENOENT') resolve('gone');
      else
        reject(
          new SpcdError('SETTINGS_INVALID', `cannot probe ${path}: ${err.code ?? err.message}`, { path }),
        );
    });
  });
}

async function resolveGroup(group: string | number): Promise<number> {
  if (typeof group === 'number') return group;
  if (/^\d+$/.test(group)) return Number(group);
  const text = await readFile('/etc/group', 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined) return Number(gid);
  }
  throw new SpcdError('SETTINGS_INVALID', `no such group: ${group}`, { group });
}
