import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { createApiHandler, type ApiHandler } from '../../agent/api/handler.js';
import { listenUnix, type ApiServer } from '../../agent/api/socket.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from './api-fakes.js';

/** The admin group the test socket is handed to (created when missing). */
export const GROUP = 'spcd-test-admin';

export interface ApiSocketStand {
  gid: number;
  base: string;
  sockDir: string;
  sockPath: string;
  status: FakeStatus;
  actions: FakeActions;
  handler: ApiHandler;
  api: ApiServer;
}

/**
 * The API on a real unix socket over fake StatusView and Actions: listening
 * before the file's tests (group GROUP, headers timeout 400 ms), gone after.
 * The fields are set once the file's beforeAll has run.
 */
export function apiSocketStand(): ApiSocketStand {
  const st = {} as ApiSocketStand;
  beforeAll(async () => {
    try {
      execFileSync('getent', ['group', GROUP]);
    } catch {
      execFileSync('groupadd', ['--system', GROUP]);
    }
    st.gid = Number(execFileSync('getent', ['group', GROUP]).toString().split(':')[2]);
    st.base = mkdtempSync(join(tmpdir(), 'spcd-api-it-'));
    chmodSync(st.base, 0o755); // traversable, so the gate under test is the socket's own directory and mode
    st.sockDir = join(st.base, 'run', 'spcd');
    st.sockPath = join(st.sockDir, 'spcd.sock');
    st.status = new FakeStatus();
    st.actions = new FakeActions(st.status);
    st.handler = createApiHandler({
      status: st.status,
      actions: st.actions,
      log: silentLogger(),
      version: '0.1.0-it',
    });
    st.api = await listenUnix(st.handler, {
      socketPath: st.sockPath,
      group: GROUP,
      limits: { headersTimeoutMs: 400 },
    });
  });
  afterAll(async () => {
    await st.api?.close();
    rmSync(st.base, { recursive: true, force: true });
  });
  return st;
}

/** curl on the stand's socket (a later --unix-socket in `args` wins), as root or as `nobody` with `asUser.groups`. */
export function curl(
  st: ApiSocketStand,
  args: string[],
  asUser?: { groups: string },
): Promise<{ code: number; out: string; err: string }> {
  const argv = ['-sS', '--max-time', '5', '--unix-socket', st.sockPath, ...args];
  const [cmd, full] = asUser
    ? ['setpriv', ['--reuid=65534', '--regid=65534', asUser.groups, 'curl', ...argv]]
    : ['curl', argv];
  return new Promise((resolve) => {
    execFile(cmd, full as string[], { timeout: 10_000 }, (err, out, errOut) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, out, err: errOut });
    });
  });
}

/** GET or POST through curl; answers status and body. */
export async function curlHttp(
  st: ApiSocketStand,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; body: string }> {
  const args = ['-X', method, '-w', '\n%{http_code}', `http://spcd${path}`];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', body);
  const r = await curl(st, args);
  expect(r.err).toBe('');
  const i = r.out.lastIndexOf('\n');
  return { status: Number(r.out.slice(i + 1)), body: r.out.slice(0, i) };
}

/** Raw bytes in; everything the server says until it closes or `ms` passes. */
export function raw(
  sockPath: string,
  parts: (string | { waitMs: number })[],
  ms = 3_000,
): Promise<{ out: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(sockPath);
    let out = '';
    let closed = false;
    const t = setTimeout(() => {
      s.destroy();
      resolve({ out, closed });
    }, ms);
    s.on('data', (c) => {
      out += c.toString();
      // a complete answer on a kept-alive connection: no need to wait for the close
      const head = out.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(out.slice(0, head));
      if (head >= 0 && len && out.length - head - 4 >= Number(len[1])) s.destroy();
    });
    s.on('error', () => undefined);
    s.on('close', () => {
      closed = true;
      clearTimeout(t);
      resolve({ out, closed });
    });
    void (async () => {
      for (const p of parts) {
        if (typeof p === 'string') {
          if (!s.destroyed) s.write(p);
        } else await new Promise((r) => setTimeout(r, p.waitMs));
      }
    })();
  });
}
