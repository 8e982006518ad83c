/**
 * Real local users and groups for tests of spcd's socket gates: made with
 * groupadd/useradd (the tests run as root), removed by the test that made
 * them, and commands run as them through setpriv (their uid, their primary
 * group and exactly the supplementary groups given).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';

export interface TestUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** Supplementary groups, by gid. */
  readonly groups: readonly number[];
}

function gidOf(group: string): number {
  return Number(execFileSync('getent', ['group', group]).toString().split(':')[2]);
}

/** A system group made for the test (an existing one of that name is reused). */
export function ensureGroup(name: string): number {
  try {
    return gidOf(name);
  } catch {
    execFileSync('groupadd', ['--system', name]);
    return gidOf(name);
  }
}

/** A system user with no home and no shell login, in `groups`; one left by an earlier run is made again. */
export function createUser(name: string, groups: readonly string[]): TestUser {
  removeUser(name);
  execFileSync('useradd', [
    '--system',
    '--no-create-home',
    '--shell',
    '/usr/sbin/nologin',
    '--user-group',
    ...(groups.length > 0 ? ['--groups', groups.join(',')] : []),
    name,
  ]);
  const uid = Number(execFileSync('id', ['-u', name]).toString().trim());
  const gid = Number(execFileSync('id', ['-g', name]).toString().trim());
  return { name, uid, gid, groups: groups.map(gidOf) };
}

export function removeUser(name: string): void {
  try {
    execFileSync('userdel', [name], { stdio: 'ignore' });
  } catch {
    // not there
  }
}

export function removeGroup(name: string): void {
  try {
    execFileSync('groupdel', [name], { stdio: 'ignore' });
  } catch {
    // not there, or still someone's primary group
  }
}

export interface Ran {
  /** The command's exit code (0 when it succeeded). */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** setpriv's arguments that run argv as `user`: its uid and gid, and only its supplementary groups. */
function asUser(user: TestUser, argv: readonly string[]): string[] {
  const groups = user.groups.length > 0 ? [`--groups=${user.groups.join(',')}`] : ['--clear-groups'];
  return [`--reuid=${user.uid}`, `--regid=${user.gid}`, ...groups, ...argv];
}

/** Starts argv as `user`, its stdin, stdout and stderr piped to the test. */
export function spawnAs(user: TestUser, argv: readonly string[]): ChildProcess {
  return spawn('setpriv', asUser(user, argv), { stdio: ['pipe', 'pipe', 'pipe'] });
}

/** Runs argv as `user`, within timeoutMs. */
export function runAs(user: TestUser, argv: readonly string[], timeoutMs = 15_000): Promise<Ran> {
  const args = asUser(user, argv);
  return new Promise((resolve) => {
    execFile('setpriv', args, { timeout: timeoutMs, maxBuffer: 8 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** An HTTP request with curl over a unix socket, as `user`: the status (0 when no connection) and body. */
export async function curlAs(
  user: TestUser,
  socket: string,
  method: string,
  path: string,
  opts: { body?: string; curl?: string } = {},
): Promise<{ status: number; body: string; curlExit: number; stderr: string }> {
  const argv = [
    opts.curl ?? 'curl',
    '-sS',
    '--max-time',
    '10',
    '--unix-socket',
    socket,
    '-X',
    method,
    '-w',
    '\n%{http_code}',
    ...(opts.body !== undefined ? ['-H', 'content-type: application/json', '--data-binary', opts.body] : []),
    `http://spcd${path}`,
  ];
  const r = await runAs(user, argv);
  const i = r.stdout.lastIndexOf('\n');
  return {
    status: Number(r.stdout.slice(i + 1)) || 0,
    body: r.stdout.slice(0, Math.max(0, i)),
    curlExit: r.code,
    stderr: r.stderr,
  };
}
