/** spcctl's only way to spcd: HTTP/1.1 over the unix socket. */
import { request, type IncomingMessage } from 'node:http';
import { CliError, EXIT, exitForStatus } from './exit.js';

export const DEFAULT_SOCKET = '/run/spcd/spcd.sock';

export interface ApiAnswer<T = unknown> {
  readonly status: number;
  readonly body: T;
}

export interface OpenStream {
  /** Resolves when the daemon ends the stream (or close() is called). */
  readonly done: Promise<void>;
  close(): void;
}

/** How often a GET is tried again after its connection was reset before any answer. */
export const RESET_RETRIES = 3;

/** The connection was closed before any answer arrived (nothing of the request was acted on for a GET). */
class ResetBeforeAnswer extends CliError {
  constructor(message: string) {
    super(message, EXIT.UNREACHABLE);
  }
}

/** The socket refused to let spcctl connect (EACCES/EPERM): a GET may try the read-only socket. */
class PermissionDenied extends CliError {
  constructor(message: string) {
    super(message, EXIT.UNREACHABLE);
  }
}

/** The read-only socket: where reads go when the admin socket refuses us, or every request when `only`. */
export interface ReadOnlySocket {
  readonly path?: string;
  readonly only?: boolean;
}

export class ApiClient {
  constructor(
    readonly socketPath: string,
    private readonly timeoutMs = 30_000,
    readonly readOnly: ReadOnlySocket = {},
  ) {}

  /**
   * A JSON request; a non-2xx answer throws CliError with the daemon's code and message. A GET whose
   * connection is reset before any answer (spcd at its connection cap with no slot to free) is tried
   * again, up to RESET_RETRIES times; a POST never is (it may have been acted on).
   */
  async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<ApiAnswer<T>> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let res: IncomingMessage;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await this.openEither(method, path, payload, this.timeoutMs);
        break;
      } catch (err) {
        if (!(err instanceof ResetBeforeAnswer) || method !== 'GET' || attempt >= RESET_RETRIES) throw err;
        await new Promise((r) => setTimeout(r, 50 * (attempt + 1)));
      }
    }
    const text = await readAll(res);
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) throw this.answerError(status, text);
    if (!(res.headers['content-type'] ?? '').includes('json')) return { status, body: text as T };
    try {
      return { status, body: JSON.parse(text) as T };
    } catch {
      throw new CliError(`spcd answered unparsable JSON on ${path}`, EXIT.FAILED);
    }
  }

  /** A streamed GET: calls onText for each chunk until the daemon ends it. */
  async stream(path: string, onText: (text: string) => void): Promise<OpenStream> {
    const res = await this.openEither('GET', path, undefined, 0);
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) throw this.answerError(status, await readAll(res));
    res.setEncoding('utf8');
    res.on('data', (t: string) => onText(t));
    const done = new Promise<void>((resolve) => {
      res.on('end', resolve);
      res.on('close', resolve);
      res.on('error', () => resolve());
    });
    return { done, close: () => res.destroy() };
  }

  /**
   * The admin socket, or the read-only one: always with `only`, and for a GET the admin socket
   * refused (spcctl run by a member of the read-only group only).
   */
  private async openEither(
    method: string,
    path: string,
    payload: string | undefined,
    timeoutMs: number,
  ): Promise<IncomingMessage> {
    const ro = this.readOnly.path;
    if (this.readOnly.only && ro) return this.open(ro, method, path, payload, timeoutMs);
    try {
      return await this.open(this.socketPath, method, path, payload, timeoutMs);
    } catch (err) {
      if (!(err instanceof PermissionDenied) || method !== 'GET' || !ro) throw err;
      try {
        return await this.open(ro, method, path, payload, timeoutMs);
      } catch (second) {
        // no read-only socket we may connect to either: the admin socket's refusal is the answer
        const notConnected =
          second instanceof CliError &&
          !(second instanceof ResetBeforeAnswer) &&
          second.exitCode === EXIT.UNREACHABLE;
        throw notConnected ? err : second;
      }
    }
  }

  private open(
    socketPath: string,
    method: string,
    path: string,
    payload: string | undefined,
    timeoutMs: number,
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath,
          method,
          path,
          headers:
            payload === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        resolve,
      );
      if (timeoutMs > 0) {
        req.setTimeout(timeoutMs, () =>
          req.destroy(
            new CliError(`spcd did not answer ${method} ${path} in ${timeoutMs / 1000}s`, EXIT.FAILED),
          ),
        );
      }
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof CliError) reject(err);
        else if (err.code === 'ECONNRESET' || err.code === 'EPIPE') {
          reject(new ResetBeforeAnswer(`spcd closed the connection before answering ${method} ${path}`));
        } else reject(connectError(socketPath, err));
      });
      req.end(payload);
    });
  }

  private answerError(status: number, text: string): CliError {
    try {
      const e = JSON.parse(text) as { code?: string; message?: string };
      if (e.code && e.message) return new CliError(`${e.code}: ${e.message}`, exitForStatus(status));
    } catch {
      // not our error shape
    }
    return new CliError(`spcd answered HTTP ${status}`, exitForStatus(status));
  }
}

function connectError(p: string, err: NodeJS.ErrnoException): CliError {
  switch (err.code) {
    case 'ENOENT':
      return new CliError(`spcd is not running or listens elsewhere: ${p}`, EXIT.UNREACHABLE);
    case 'EACCES':
    case 'EPERM':
      return new PermissionDenied(
        `permission denied on ${p}: run as root or a member of the spcd admin group (for reads: the read-only group)`,
      );
    case 'ECONNREFUSED':
      return new CliError(`spcd is not running (nothing listens on ${p})`, EXIT.UNREACHABLE);
    default:
      return new CliError(`cannot reach spcd at ${p}: ${err.code ?? err.message}`, EXIT.UNREACHABLE);
  }
}

function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });
}

/** Splits a stream of text into whole lines. */
export function lineSplitter(onLine: (line: string) => void): (text: string) => void {
  let buf = '';
  return (text) => {
    buf += text;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  };
}
