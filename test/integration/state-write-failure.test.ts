/**
 * A full state directory, for real: the state directory of a running spcd is
 * a small tmpfs this test mounts (as root) and fills. `spcctl stop` fails
 * honestly with STATE_WRITE_FAILED (ENOSPC) and stops nothing, its retry
 * fails the same way, and once there is room the retry writes the stop, which
 * lasts across an spcd restart.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  closeSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, REPO, sandbox, SpcdProcess, writeSet } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb = sandbox('statefull');
const svc = `${sb.instance}-svc`;
const filler = join(sb.stateDir, 'filler');
const started: SpcdProcess[] = [];
let mounted = false;

afterAll(async () => {
  for (const p of started) await p.kill9();
  if (mounted) execFileSync('umount', [sb.stateDir]);
  await cleanupInstance(sb.instance);
});

const spcd = (): SpcdProcess => {
  const p = SpcdProcess.start(sb);
  started.push(p);
  return p;
};

/** spcctl as an operator runs it; resolves with its exit code and output, whatever the code. */
function spcctl(...args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      join(REPO, 'bin', 'spcctl.js'),
      args,
      { env: { ...process.env, SPCD_SOCKET: sb.socket }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

/** Writes zeros until the file system says ENOSPC. */
function fill(path: string): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(4096);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

describe('spcctl stop on a full state directory', () => {
  it('fails until there is room, then persists the stop', async () => {
    writeSet(sb, 'svc.yaml', `set: svc\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`);
    // Created on an ordinary disk (preflight wants 100 MiB free to create), then moved onto a small tmpfs.
    const first = spcd();
    await first.ready();
    const before = await waitFor('svc running', async () => {
      const c = await inspect(svc);
      return c?.State.Running ? c : undefined;
    });
    expect(await first.stop()).toBe(0);
    const copy = mkdtempSync(join(tmpdir(), 'spcd-statefull-copy-'));
    cpSync(sb.stateDir, copy, { recursive: true });
    mkdirSync(sb.stateDir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k,mode=0700', 'tmpfs', sb.stateDir]);
    mounted = true;
    cpSync(copy, sb.stateDir, { recursive: true });
    rmSync(copy, { recursive: true });

    const second = spcd();
    await second.ready();
    expect((await inspect(svc))?.Id).toBe(before.Id);
    fill(filler);

    for (const attempt of [1, 2]) {
      const r = await spcctl('stop', svc, '--wait', '--timeout', '30');
      expect(r.code, `attempt ${attempt}: ${r.out}`).toBe(1);
      expect(r.out).toContain('STATE_WRITE_FAILED');
      expect(r.out).toContain('ENOSPC');
      expect((await inspect(svc))?.State.Running, `attempt ${attempt}`).toBe(true);
    }
    const onDisk = (): { heldStopped: boolean } =>
      (
        JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as {
          containers: Record<string, { heldStopped: boolean }>;
        }
      ).containers[svc]!;
    expect(onDisk().heldStopped).toBe(false);

    rmSync(filler);
    const ok = await spcctl('stop', svc, '--wait', '--timeout', '30');
    expect(ok.code, ok.out).toBe(0);
    expect((await inspect(svc))?.State.Running).toBe(false);
    expect(onDisk().heldStopped).toBe(true);

    // The operator's stop lasts across a restart: nothing is planned for the stopped container.
    expect(await second.stop()).toBe(0);
    const third = spcd();
    await third.ready();
    const plan = JSON.parse(
      execFileSync('curl', ['-s', '--unix-socket', sb.socket, 'http://spcd/v1/plan'], { encoding: 'utf8' }),
    ) as { items: unknown[] };
    expect(plan.items).toEqual([]);
    expect((await inspect(svc))?.State.Running).toBe(false);
    expect((await inspect(svc))?.Id).toBe(before.Id);
  });
});
