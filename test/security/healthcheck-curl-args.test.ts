import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';

/**
 * The shipped healthcheck_curl, run for real with this host's /bin/sh (dash)
 * and curl, as a Debian-based image runs it: its argument must be taken as
 * a URL and nothing else. A check whose argument is `-K FILE` made curl read
 * a config file of the container's and fetch whatever URL that names, so the
 * check answered for another service than it shows (and read a file as root).
 */
const run = promisify(execFile);
const script = join(REPO, 'healthchecks', 'healthcheck_curl');
let server: http.Server;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-hccurl-'));
  server = http.createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

async function check(arg: string): Promise<{ code: number; out: string }> {
  try {
    const r = await run('sh', [script, arg], { encoding: 'utf8', timeout: 30_000 });
    return { code: 0, out: r.stdout.trim() };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: e.stdout.trim() };
  }
}

describe('healthcheck_curl takes its argument as a URL only', () => {
  it('an argument that is a curl option (-K FILE) is refused, not run', async () => {
    const port = (server.address() as AddressInfo).port;
    const conf = join(dir, 'curlrc');
    writeFileSync(conf, `url = "http://127.0.0.1:${port}/"\n`);
    expect(await check(`-K${conf}`)).toEqual({
      code: 1,
      out: 'healthcheck_curl: the argument is not an http:// or https:// URL',
    });
    // What it is for still works.
    expect(await check(`http://127.0.0.1:${port}/`)).toEqual({
      code: 0,
      out: `http://127.0.0.1:${port}/: HTTP 200`,
    });
  });
});
