/**
 * The API on a real unix socket, driven by real clients: curl --unix-socket
 * for every route, curl as `nobody` for the permission gate, and raw bytes
 * over net.connect for the malformed-request corpus. The StatusView and
 * Actions are fakes (the daemon-backed tests belong to the lead).
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler, type ApiHandler } from '../../agent/api/handler.js';
import { listenUnix, type ApiServer } from '../../agent/api/socket.js';
import { isSpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';

const GROUP = 'spcd-test-admin';
let gid: number;
let base: string;
let sockDir: string;
let sockPath: string;
let status: FakeStatus;
let actions: FakeActions;
let handler: ApiHandler;
let api: ApiServer;

function curl(
  args: string[],
  asUser?: { groups: string },
): Promise<{ code: number; out: string; err: string }> {
  const argv = ['-sS', '--max-time', '5', '--unix-socket', sockPath, ...args];
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
async function curlHttp(
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; body: string }> {
  const args = ['-X', method, '-w', '\n%{http_code}', `http://spcd${path}`];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', body);
  const r = await curl(args);
  expect(r.err).toBe('');
  const i = r.out.lastIndexOf('\n');
  return { status: Number(r.out.slice(i + 1)), body: r.out.slice(0, i) };
}

beforeAll(async () => {
  try {
    execFileSync('getent', ['group', GROUP]);
  } catch {
    execFileSync('groupadd', ['--system', GROUP]);
  }
  gid = Number(execFileSync('getent', ['group', GROUP]).toString().split(':')[2]);
  base = mkdtempSync(join(tmpdir(), 'spcd-api-it-'));
  chmodSync(base, 0o755); // traversable, so the gate under test is the socket's own directory and mode
  sockDir = join(base, 'run', 'spcd');
  sockPath = join(sockDir, 'spcd.sock');
  status = new FakeStatus();
  actions = new FakeActions(status);
  handler = createApiHandler({ status, actions, log: silentLogger(), version: '0.1.0-it' });
  api = await listenUnix(handler, { socketPath: sockPath, group: GROUP, limits: { headersTimeoutMs: 400 } });
});

afterAll(async () => {
  await api?.close();
  rmSync(base, { recursive: true, force: true });
});

describe('the socket file', () => {
  it('is 0660, owned by root and the admin group, in a 0750 directory; no temp name left', () => {
    const st = lstatSync(sockPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o660);
    expect(st.uid).toBe(0);
    expect(st.gid).toBe(gid);
    const d = statSync(sockDir);
    expect(d.mode & 0o777).toBe(0o750);
    expect(d.gid).toBe(gid);
    expect(readdirSync(sockDir)).toEqual(['spcd.sock']);
  });

  it('never appears at its final path with looser permissions (watched while listening)', async () => {
    const path = join(sockDir, 'watched.sock');
    const seen: number[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        try {
          seen.push(lstatSync(path).mode & 0o777);
        } catch {
          // not there yet
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    const s = await listenUnix(handler, { socketPath: path, group: GROUP });
    await new Promise((r) => setTimeout(r, 20));
    watching = false;
    await watch;
    await s.close();
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set([0o660]));
    expect(existsSync(path)).toBe(false);
  });

  it('a user outside the admin group gets EACCES; a member gets through', async () => {
    const outsider = await curl(['http://spcd/v1/status'], { groups: '--clear-groups' });
    expect(outsider.code).toBe(7); // curl: couldn't connect
    // curl does not print the errno: a node client as the same user shows it
    const errno = await new Promise<string>((resolve) => {
      const script = `require('net').connect(${JSON.stringify(sockPath)}).on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(0)})`;
      execFile(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script],
        (_e, out) => resolve(out.trim()),
      );
    });
    expect(errno).toBe('EACCES');
    const member = await curl(['-o', '/dev/null', '-w', '%{http_code}', 'http://spcd/v1/status'], {
      groups: `--groups=${gid}`,
    });
    expect(member.out).toBe('200');
  });

  it('spcctl as an outsider says permission denied and exits 3', async () => {
    const r = await new Promise<{ code: number; err: string }>((resolve) => {
      execFile(
        'setpriv',
        [
          '--reuid=65534',
          '--regid=65534',
          '--clear-groups',
          process.execPath,
          'bin/spcctl.js',
          '--socket',
          sockPath,
          'status',
        ],
        (e, _out, err) => resolve({ code: e ? Number(e.code) : 0, err }),
      );
    });
    expect(r).toEqual({
      code: 3,
      err: `spcctl: permission denied on ${sockPath}: run as root or a member of the spcd admin group (for reads: the read-only group)\n`,
    });
  });

  it('a stale socket file from a crash is replaced', async () => {
    const path = join(sockDir, 'stale.sock');
    // bound but never listening, and the binder gone: exactly what a kill -9 leaves
    execFileSync('python3', [
      '-c',
      `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(path)})`,
    ]);
    expect(lstatSync(path).isSocket()).toBe(true);
    const s = await listenUnix(handler, { socketPath: path, group: GROUP });
    try {
      const r = await curl([
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '--unix-socket',
        path,
        'http://spcd/v1/status',
      ]);
      expect(r.out).toBe('200');
    } finally {
      await s.close();
    }
  });

  it('a second listener on a live socket refuses with SOCKET_IN_USE and leaves the first serving', async () => {
    const err = await listenUnix(handler, { socketPath: sockPath, group: GROUP }).catch((e: unknown) => e);
    expect(isSpcdError(err, 'SOCKET_IN_USE')).toBe(true);
    expect((await curlHttp('GET', '/v1/status')).status).toBe(200);
    expect(readdirSync(sockDir).filter((n) => n.startsWith('.spcd-'))).toEqual([]);
  });

  it('a path holding something other than a socket is never removed', async () => {
    const path = join(sockDir, 'file.sock');
    writeFileSync(path, 'keep me');
    const err = await listenUnix(handler, { socketPath: path }).catch((e: unknown) => e);
    expect(isSpcdError(err, 'SETTINGS_INVALID')).toBe(true);
    expect(lstatSync(path).isFile()).toBe(true);
    rmSync(path);
  });
});

describe('every route through curl --unix-socket', () => {
  it.each([
    ['/v1/status', '"version":"0.1.0-test"'],
    ['/v1/sets', '"sets":['],
    ['/v1/sets/compute', '"path":"compute"'],
    ['/v1/sets/compute/neutron', '"path":"compute/neutron"'],
    ['/v1/containers/nova_compute', '"name":"nova_compute"'],
    ['/v1/containers/nova_compute/health', '"checks":['],
    ['/v1/containers/nova_compute/generations', '"generations":['],
    ['/v1/plan', '"items":['],
  ])('GET %s', async (path, expected) => {
    const r = await curlHttp('GET', path);
    expect(r.status).toBe(200);
    expect(r.body).toContain(expected);
  });

  it('GET logs and metrics', async () => {
    const logs = await curlHttp('GET', '/v1/containers/cron/logs?tail=2');
    expect(logs).toEqual({ status: 200, body: 'line 2\nline 3\n' });
    const m = await curlHttp('GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toContain('spcd_container_state{container="cron",set="infra",state="running"} 1');
  });

  it('GET /v1/events streams an operation followed through its end', async () => {
    const stream = curl(['-N', '--max-time', '3', 'http://spcd/v1/events']);
    const deadline = Date.now() + 3_000;
    while (status.bus.size === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const ref = JSON.parse((await curlHttp('POST', '/v1/containers/cron/restart', '{}')).body) as never;
    actions.finish(ref, true);
    const r = await stream;
    expect(r.code).toBe(28); // curl's --max-time on an endless stream
    const types = r.out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { type: string }).type);
    expect(types).toEqual(['operation', 'pull-progress', 'upgrade-step', 'operation']);
  });

  it.each([
    ['/v1/containers/nova_compute/restart', '{}'],
    ['/v1/containers/nova_compute/stop', '{"expectedGeneration":3}'],
    ['/v1/containers/nova_compute/start', '{}'],
    ['/v1/containers/nova_compute/upgrade', '{"image":"spcd-demo/service:2"}'],
    ['/v1/containers/nova_compute/rollback', '{"toGeneration":2}'],
    ['/v1/sets/compute/upgrade', '{}'],
    ['/v1/reload', ''],
  ])('POST %s answers 202', async (path, body) => {
    const r = await curlHttp('POST', path, body);
    expect(r.status).toBe(202);
    const ref = JSON.parse(r.body) as { operationId: string };
    expect(ref.operationId).toMatch(/^op-/);
    actions.finish(ref as never, true);
  });

  it('errors come back in the one shape', async () => {
    const r = await curlHttp('GET', '/v1/containers/ghost');
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toEqual({
      code: 'NOT_FOUND',
      message: 'no container named ghost',
      details: { container: 'ghost' },
    });
    expect((await curlHttp('PUT', '/v1/status')).status).toBe(405);
    expect((await curlHttp('POST', '/v1/containers/cron/upgrade', '{"image":1}')).status).toBe(422);
  });
});

/** Raw bytes in; everything the server says until it closes or `ms` passes. */
function raw(parts: (string | { waitMs: number })[], ms = 3_000): Promise<{ out: string; closed: boolean }> {
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

describe('malformed-request corpus: 4xx or a closed connection, and the server keeps serving', () => {
  const big = 'x'.repeat(200_000);
  const corpus: [string, (string | { waitMs: number })[], RegExp | null][] = [
    [
      'bad JSON',
      ['POST /v1/containers/cron/restart HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"a":tru}'],
      /^HTTP\/1.1 400/,
    ],
    [
      'deep JSON',
      [
        `POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n${'['.repeat(100)}${']'.repeat(100)}`,
      ],
      /^HTTP\/1.1 400/,
    ],
    [
      'huge body (declared)',
      [`POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n`, big],
      /^HTTP\/1.1 413/,
    ],
    [
      'huge body (chunked)',
      [
        'POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n',
        `${(100_000).toString(16)}\r\n${big.slice(0, 100_000)}\r\n`,
        `${(100_000).toString(16)}\r\n${big.slice(0, 100_000)}\r\n0\r\n\r\n`,
      ],
      /^HTTP\/1.1 413/,
    ],
    [
      'slow headers',
      ['GET /v1/status HTTP/1.1\r\nHost: x\r\n', { waitMs: 1_500 }, 'X-Late: 1\r\n\r\n'],
      /^HTTP\/1.1 408/,
    ],
    [
      'Content-Length with chunked',
      [
        'POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
      ],
      /^HTTP\/1.1 400/,
    ],
    ['garbage request line', ['\x16\x03\x01\x02\x00garbage\r\n\r\n'], /^HTTP\/1.1 400/],
    ['unknown method', ['BREW /v1/status HTTP/1.1\r\nHost: x\r\n\r\n'], /^HTTP\/1.1 4\d\d/],
    [
      'header overflow',
      [`GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`],
      /^HTTP\/1.1 431/,
    ],
    [
      'two Content-Lengths',
      ['POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'],
      /^HTTP\/1.1 400/,
    ],
    [
      'truncated body then close',
      ['POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"a"'],
      null,
    ],
  ];

  it.each(corpus)('%s', async (_name, parts, expected) => {
    const before = actions.calls.length;
    const r = await raw(parts, expected === null ? 300 : 3_000);
    if (expected) {
      expect(r.out).toMatch(expected);
      expect(r.out).toMatch(/\r\n\r\n\{"code":"[A-Z_]+","message":/);
    }
    expect(actions.calls.length).toBe(before); // nothing malformed reached an action
    expect((await curlHttp('GET', '/v1/status')).status).toBe(200);
  });
});

describe('connection cap', () => {
  it('connections over maxConnections are closed; the server serves again once they go', async () => {
    const path = join(sockDir, 'capped.sock');
    const s = await listenUnix(handler, { socketPath: path, limits: { maxConnections: 3 } });
    const open = await Promise.all(
      [0, 1, 2].map(
        () =>
          new Promise<ReturnType<typeof connect>>((resolve) => {
            const c = connect(path, () => resolve(c));
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 50));
    const refused = await curl([
      '-w',
      '%{http_code}',
      '-o',
      '/dev/null',
      '--unix-socket',
      path,
      'http://spcd/v1/status',
    ]);
    expect(refused.out).not.toBe('200');
    open.forEach((c) => c.destroy());
    const deadline = Date.now() + 3_000;
    let ok = '';
    while (ok !== '200' && Date.now() < deadline) {
      ok = (
        await curl(['-w', '%{http_code}', '-o', '/dev/null', '--unix-socket', path, 'http://spcd/v1/status'])
      ).out;
    }
    expect(ok).toBe('200');
    await s.close();
  });
});
