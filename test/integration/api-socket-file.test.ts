/**
 * The API's unix socket file: its mode and owners, the permission gate (curl
 * and spcctl as `nobody`), stale and foreign files at its path.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listenUnix } from '../../agent/api/socket.js';
import { isSpcdError } from '../../agent/errors.js';
import { GROUP, apiSocketStand, curl, curlHttp } from '../support/api-socket.js';
import { waitFor } from '../support/wait.js';

const st = apiSocketStand();

describe('the socket file', () => {
  it('is 0660, owned by root and the admin group, in a 0750 directory; no temp name left', () => {
    const f = lstatSync(st.sockPath);
    expect(f.isSocket()).toBe(true);
    expect(f.mode & 0o777).toBe(0o660);
    expect(f.uid).toBe(0);
    expect(f.gid).toBe(st.gid);
    const d = statSync(st.sockDir);
    expect(d.mode & 0o777).toBe(0o750);
    expect(d.gid).toBe(st.gid);
    expect(readdirSync(st.sockDir)).toEqual(['spcd.sock']);
  });

  it('never appears at its final path with looser permissions (watched while listening)', async () => {
    const path = join(st.sockDir, 'watched.sock');
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
    const s = await listenUnix(st.handler, { socketPath: path, group: GROUP });
    // watched a while after listening: until seen at its final path several times
    await waitFor('the socket seen at its path', () => seen.length >= 20);
    watching = false;
    await watch;
    await s.close();
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set([0o660]));
    expect(existsSync(path)).toBe(false);
  });

  it('a user outside the admin group gets EACCES; a member gets through', async () => {
    const outsider = await curl(st, ['http://spcd/v1/status'], { groups: '--clear-groups' });
    expect(outsider.code).toBe(7); // curl: couldn't connect
    // curl does not print the errno: a node client as the same user shows it
    const errno = await new Promise<string>((resolve) => {
      const script = `require('net').connect(${JSON.stringify(st.sockPath)}).on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(0)})`;
      execFile(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script],
        (_e, out) => resolve(out.trim()),
      );
    });
    expect(errno).toBe('EACCES');
    const member = await curl(st, ['-o', '/dev/null', '-w', '%{http_code}', 'http://spcd/v1/status'], {
      groups: `--groups=${st.gid}`,
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
          st.sockPath,
          'status',
        ],
        (e, _out, err) => resolve({ code: e ? Number(e.code) : 0, err }),
      );
    });
    expect(r).toEqual({
      code: 3,
      err: `spcctl: permission denied on ${st.sockPath}: run as root or a member of the spcd admin group (for reads: the read-only group)\n`,
    });
  });

  it('a stale socket file from a crash is replaced', async () => {
    const path = join(st.sockDir, 'stale.sock');
    // bound but never listening, and the binder gone: exactly what a kill -9 leaves
    execFileSync('python3', [
      '-c',
      `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(path)})`,
    ]);
    expect(lstatSync(path).isSocket()).toBe(true);
    const s = await listenUnix(st.handler, { socketPath: path, group: GROUP });
    try {
      const r = await curl(st, [
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
    const err = await listenUnix(st.handler, { socketPath: st.sockPath, group: GROUP }).catch(
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'SOCKET_IN_USE')).toBe(true);
    expect((await curlHttp(st, 'GET', '/v1/status')).status).toBe(200);
    expect(readdirSync(st.sockDir).filter((n) => n.startsWith('.spcd-'))).toEqual([]);
  });

  it('a path holding something other than a socket is never removed', async () => {
    const path = join(st.sockDir, 'file.sock');
    writeFileSync(path, 'keep me');
    const err = await listenUnix(st.handler, { socketPath: path }).catch((e: unknown) => e);
    expect(isSpcdError(err, 'SETTINGS_INVALID')).toBe(true);
    expect(lstatSync(path).isFile()).toBe(true);
    rmSync(path);
  });
});
