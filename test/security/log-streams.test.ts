import { execFile, execFileSync } from 'node:child_process';
import { request, type ClientRequest } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * The logs route against the admin group (anyone who may use the socket):
 * a real spcd and real containers. One attack holds spcd's memory with log
 * followers that never read; the other makes a container's output repaint
 * the terminal of the operator who runs `spcctl logs`.
 */
const run = promisify(execFile);
const sb: Sandbox = sandbox('sec-logs');
const busy = `${sb.instance}-busy`;
const ansi = `${sb.instance}-ansi`;
let spcd: SpcdProcess;
const followers: ClientRequest[] = [];

// 10,000 lines of about 1.5 KiB: a follower with ?tail=10000 is sent 15 MiB, under one stream's 16 MiB cap.
const BUSY = `l=$(head -c 1500 /dev/zero | tr '\\0' x); i=0; while [ $i -lt 10000 ]; do echo "$i $l"; i=$((i+1)); done; echo done-writing; exec sleep 3600`;
// A window title, a screen clear and a cursor move, as a hostile process in a container would print them.
const ANSI = `printf 'before\\033]0;owned\\007\\033[2J\\033[Hafter\\n'; exec sleep 3600`;

const SET = `set: logs
containers:
  ${busy}:
    image: spcd-demo/service:1
    command:
      - sh
      - -c
      - |
        ${BUSY}
    network: none
    stop_grace_period: 1s
  ${ansi}:
    image: spcd-demo/service:1
    command:
      - sh
      - -c
      - |
        ${ANSI}
    network: none
    stop_grace_period: 1s
`;

const dockerLogs = (name: string): string =>
  execFileSync('/usr/bin/docker', ['logs', '--tail', '1', name], { encoding: 'utf8' });

/** A follower that never reads: spcd's send buffer for it grows. */
function stalledFollower(path: string): ClientRequest {
  const req = request({ socketPath: sb.socket, path }, () => undefined); // the response is never consumed
  req.on('error', () => undefined);
  req.end();
  return req;
}

function get(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sb.socket, path }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  writeSet(sb, 'logs.yaml', SET);
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor(
    'busy wrote its lines',
    async () => (await inspect(busy)) && dockerLogs(busy).includes('done-writing'),
    {
      timeoutMs: 60_000,
    },
  );
  await waitFor('ansi printed', async () => (await inspect(ansi)) && dockerLogs(ansi).includes('after'));
});

afterAll(async () => {
  for (const f of followers) f.destroy();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('log streams', () => {
  it('followers that never read cannot make spcd hold more than the streams budget', async () => {
    const path = `/v1/containers/${busy}/logs?tail=10000&follow=1`;
    // Five would hold 75 MiB; the budget of all streams is 64 MiB.
    for (let i = 0; i < 5; i++) followers.push(stalledFollower(path));
    // Once they hold what they may, one more stream (even a short one) is refused with the typed error.
    const refused = await waitFor(
      'a new log stream refused',
      async () => {
        const r = await get(`/v1/containers/${busy}/logs?tail=0`);
        return r.status === 503 ? r : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const body = JSON.parse(refused.body) as { code: string; message: string };
    expect(body.code).toBe('STREAM_BUDGET_FULL');
    expect(body.message).toMatch(/over the 64 MiB all streams may hold/);
    // Closed, they free the budget: streams are taken again.
    for (const f of followers.splice(0)) f.destroy();
    await waitFor(
      'log streams taken again',
      async () => (await get(`/v1/containers/${busy}/logs?tail=0`)).status === 200,
    );
  });

  it('spcctl logs on a terminal shows a container escape sequence escaped; --raw keeps the bytes', async () => {
    const spcctl = `${join(REPO, 'bin', 'spcctl.js')} --socket ${sb.socket} logs`;
    // `script` gives spcctl a pseudo-terminal as its stdout, as an operator's shell does.
    const onTty = async (args: string): Promise<string> =>
      (await run('script', ['-qec', `${spcctl} ${args}`, '/dev/null'], { encoding: 'utf8' })).stdout;
    const shown = await onTty(ansi);
    expect(shown).toContain('before\\x1b]0;owned\\x07\\x1b[2J\\x1b[Hafter');
    expect(shown).not.toContain('\x1b');
    const raw = await onTty(`--raw ${ansi}`);
    expect(raw).toContain('before\x1b]0;owned\x07\x1b[2J\x1b[Hafter');
  });
});
