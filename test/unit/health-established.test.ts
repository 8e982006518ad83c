/**
 * The host-side `established` probe (Kolla's healthcheck_port meaning) with
 * real processes: node started through symlinks so each has its own comm,
 * a listener on 127.0.0.1 and a client connected to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { establishedProbe } from '../../agent/health/host-probes.js';
import { waitFor } from '../support/wait.js';

const never = new AbortController().signal;

/** A node process named `name` running `script`, answering lines on stdout. */
function named(dir: string, name: string, script: string, ...args: string[]): ChildProcess {
  const bin = join(dir, name);
  symlinkSync(process.execPath, bin);
  return spawn(bin, ['-e', script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
}

function nextLine(p: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    p.stdout?.once('data', (b: Buffer) => resolve(b.toString().trim()));
    p.once('exit', (code) => reject(new Error(`exited with ${code}`)));
  });
}

const SERVER = `const s = require('net').createServer((c) => c.on('error', () => {}));
s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
const CLIENT = `const c = require('net').connect(Number(process.argv[1]), '127.0.0.1', () => console.log('connected'));
process.stdin.on('data', () => c.end(() => { c.destroy(); console.log('closed'); }));
setInterval(() => {}, 1000);`;

describe('established probe (host-side, /proc)', () => {
  let dir = '';
  let server: ChildProcess;
  let client: ChildProcess | undefined;
  let port = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'spcd-established-'));
    server = named(dir, 'spcd-est-srv', SERVER);
    port = Number(await nextLine(server));
  });
  afterAll(() => {
    client?.kill('SIGKILL');
    server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const probe = (name: string, pid: number, ports = [port]) =>
    establishedProbe(name, ports, { containerId: '', pid }, 2000, never);

  it('a process that only listens is unhealthy', async () => {
    const r = await probe('spcd-est-srv', server.pid ?? 0);
    expect(r).toMatchObject({ ok: false, timedOut: false });
    expect(r.output).toBe(
      `spcd-est-srv (pid ${server.pid}) has no established tcp connection on port ${port}`,
    );
  });

  it('a connected client with another name is healthy; disconnected it is unhealthy', async () => {
    client = named(dir, 'spcd-est-cli', CLIENT, String(port));
    expect(await nextLine(client)).toBe('connected');
    const pid = client.pid ?? 0;
    const ok = await probe('spcd-est-cli', pid);
    expect(ok.ok).toBe(true);
    expect(ok.output).toMatch(
      new RegExp(
        `^spcd-est-cli \\(pid ${pid}\\) has an established connection 127\\.0\\.0\\.1:\\d+ -> 127\\.0\\.0\\.1:${port}$`,
      ),
    );
    // The same process, another port: not this connection.
    expect((await probe('spcd-est-cli', pid, [port === 1 ? 2 : port - 1])).ok).toBe(false);
    // The listener's accepted socket involves the port too (Kolla's "involving that port").
    await waitFor('the accepted socket', async () => (await probe('spcd-est-srv', server.pid ?? 0)).ok);
    // A name that no process of the target has.
    expect(await probe('nova-compute', pid)).toMatchObject({
      ok: false,
      output: 'no process nova-compute in container',
    });

    client.stdin?.write('close\n');
    expect(await nextLine(client)).toBe('closed');
    const down = await probe('spcd-est-cli', pid);
    expect(down.ok).toBe(false);
    expect(down.output).toBe(`spcd-est-cli (pid ${pid}) has no established tcp connection on port ${port}`);
  });

  it('finds a script run by an interpreter by the base name of its path (python3 /usr/bin/nova-compute)', async () => {
    const script = join(dir, 'spcd-est-script');
    writeFileSync(script, CLIENT.replace('process.argv[1]', 'process.argv[2]'));
    const c = spawn(process.execPath, [script, String(port)], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      expect(await nextLine(c)).toBe('connected');
      expect(readFileSync(`/proc/${c.pid}/comm`, 'utf8').trim()).not.toBe('spcd-est-script');
      expect((await probe('spcd-est-script', c.pid ?? 0)).ok).toBe(true);
    } finally {
      c.kill('SIGKILL');
    }
  });
});
