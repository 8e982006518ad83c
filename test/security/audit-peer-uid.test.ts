/**
 * Attack: a member of the admin group makes its write appear in the audit
 * log as root's. The audit uid used to come from `ss -xpnH`: the first
 * `pid=` in the users:(("comm",pid=…,fd=…)) field of the peer socket's row,
 * whose process's uid was then read from /proc. `comm` is the client's own
 * executable name, printed unescaped, so a client run through a link named
 * `x",pid=1,fd=3` shows as users:(("x",pid=1,fd=3",pid=<real>,fd=3)) and
 * the parser took pid 1, owned by root. Here a real user made with useradd,
 * in the admin group only, runs node under that name: it sends POST
 * /v1/reload to a real spcd and keeps its connection open (an ordinary
 * keep-alive client) until the audit line is written. That line must carry
 * the user's own uid and gid (the kernel's SO_PEERCRED), never pid 1's
 * owner (before SO_PEERCRED it named uid 0).
 */
import { mkdirSync, readFileSync, rmSync, symlinkSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpcdProcess, sandbox, type Sandbox } from '../support/daemon.js';
import {
  createUser,
  ensureGroup,
  spawnAs,
  removeGroup,
  removeUser,
  type TestUser,
} from '../support/users.js';
import { waitFor } from '../support/wait.js';

const ADMIN_GROUP = 'spcd-sec-audit';
const FORGER = 'spcd-sec-forger';

/** POST /v1/reload over a keep-alive connection, printed status, the connection held until stdin ends. */
const CLIENT = `
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true });
const req = http.request(
  { socketPath: process.argv[1], method: 'POST', path: '/v1/reload', agent,
    headers: { 'content-type': 'application/json', 'content-length': 2 } },
  (res) => { res.resume(); res.on('end', () => process.stdout.write(res.statusCode + '\\n')); },
);
req.on('error', (e) => { process.stderr.write(String(e)); process.exit(1); });
req.end('{}');
process.stdin.on('end', () => { agent.destroy(); process.exit(0); });
process.stdin.resume();
`;

const sb: Sandbox = sandbox('sec-audit');
let spcd: SpcdProcess | undefined;
let forger: TestUser;

beforeAll(async () => {
  ensureGroup(ADMIN_GROUP);
  forger = createUser(FORGER, [ADMIN_GROUP]);
  chmodSync(sb.root, 0o755); // the forger must reach the socket's directory and the forged client
  spcd = SpcdProcess.start(sb, ['--admin-group', ADMIN_GROUP]);
  await spcd.ready();
});

afterAll(async () => {
  await spcd?.stop();
  removeUser(FORGER);
  removeGroup(ADMIN_GROUP);
  rmSync(sb.root, { recursive: true, force: true });
});

interface AuditLine {
  audit?: boolean;
  route?: string;
  method?: string;
  uid?: number | null;
  gid?: number | null;
  pid?: number | null;
}

describe('the audit uid', () => {
  it("names the caller's own uid, whatever its process calls itself", async () => {
    const pid1Uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync('/proc/1/status', 'utf8'))?.[1]);
    expect(pid1Uid).not.toBe(forger.uid); // the uid the forgery points at is someone else's

    const dir = join(sb.root, 'forge');
    mkdirSync(dir, { mode: 0o755 });
    const forged = join(dir, 'x",pid=1,fd=3'); // 13 characters: the whole of it fits in comm (15)
    symlinkSync(process.execPath, forged);

    const client = spawnAs(forger, [forged, '-e', CLIENT, sb.socket]);
    let out = '';
    client.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    client.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => client.on('exit', (code) => r(code)));
    await waitFor('the reload answered', () => /^2\d\d$/m.test(out) || client.exitCode !== null);
    expect(out.trim()).toMatch(/^2\d\d$/);
    // setpriv exec'd node: the process holding the connection calls itself by the forged name
    expect(readFileSync(`/proc/${client.pid}/comm`, 'utf8').trim()).toBe('x",pid=1,fd=3');

    const line = await waitFor('the reload audited', () =>
      spcd?.output
        .map((l): AuditLine | null => {
          try {
            return JSON.parse(l) as AuditLine;
          } catch {
            return null;
          }
        })
        .find((l) => l?.audit === true && l.route === '/v1/reload' && l.method === 'POST'),
    );
    client.stdin?.end();
    expect(await exited).toBe(0);
    expect(line).toMatchObject({ uid: forger.uid, gid: forger.gid });
    expect(line?.pid).toBeGreaterThan(1);
  });
});
