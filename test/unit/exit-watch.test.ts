/**
 * CgroupExitWatch (agent/host/exit-watch.ts) on a fake /proc and cgroup
 * tree: it follows the cgroup runc kills through (v1 devices, else v2), only
 * when that cgroup names the container and lists its process, and says
 * "gone" once every process in it has exited (zombies count as exited) or
 * the cgroup was removed.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupExitWatch, EXIT_POLL_MS } from '../../agent/host/exit-watch.js';
import { FakeClock } from '../support/fake-clock.js';

const ID = 'c0ffee'.repeat(10) + 'abcd';
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tree(o: { v1?: boolean; cgroupPath?: string } = {}) {
  const root = mkdtempSync(join(tmpdir(), 'spcd-exitwatch-'));
  dirs.push(root);
  const proc = join(root, 'proc');
  const cg = join(root, 'cgroup');
  const path = o.cgroupPath ?? `/docker/${ID}`;
  const group = o.v1 === false ? join(cg, path) : join(cg, 'devices', path);
  mkdirSync(group, { recursive: true });
  const setProcess = (pid: number, state = 'S'): void => {
    mkdirSync(join(proc, String(pid)), { recursive: true });
    writeFileSync(join(proc, String(pid), 'stat'), `${pid} (lib virtd) ${state} 1 2 3\n`);
    writeFileSync(
      join(proc, String(pid), 'cgroup'),
      o.v1 === false
        ? `0::${path}\n`
        : `12:pids:${path}\n5:devices:${path}\n1:name=systemd:${path}\n0::${path}\n`,
    );
  };
  const setProcs = (pids: number[]): void =>
    writeFileSync(join(group, 'cgroup.procs'), pids.map((p) => `${p}\n`).join(''));
  const removeProcess = (pid: number): void => rmSync(join(proc, String(pid)), { recursive: true });
  return { proc, cg, group, setProcess, setProcs, removeProcess };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
};

async function pending<T>(p: Promise<T>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await flush();
  return !done;
}

/**
 * Steps the fake clock one poll at a time until `p` settles (deadline 10 s of
 * real time): a poll whose reads are still in flight when the clock moves
 * schedules its next timer only afterwards, so one advance is not enough on a
 * loaded machine.
 */
async function settle<T>(clock: FakeClock, p: Promise<T>): Promise<T> {
  let done = false;
  void p.then(() => (done = true));
  const deadline = Date.now() + 10_000;
  while (!done) {
    if (Date.now() > deadline) throw new Error('the watch did not answer within 10 s');
    clock.advance(EXIT_POLL_MS);
    await new Promise<void>((r) => setImmediate(r));
  }
  return p;
}

describe('CgroupExitWatch', () => {
  it('says gone once the v1 devices cgroup has no live process left (a zombie counts as gone)', async () => {
    const t = tree();
    t.setProcess(100);
    t.setProcess(101);
    t.setProcs([100, 101]);
    const clock = new FakeClock();
    const w = new CgroupExitWatch(clock, t.proc, t.cg);
    const tracker = await w.track(ID, 100);
    expect(tracker).toBeDefined();
    const gone = tracker!.gone(new AbortController().signal);
    expect(await pending(gone)).toBe(true);
    // The init exits; a child is still alive in the cgroup: not gone.
    t.removeProcess(100);
    t.setProcs([101]);
    clock.advance(EXIT_POLL_MS);
    expect(await pending(gone)).toBe(true);
    // The child is a zombie now.
    t.setProcess(101, 'Z');
    expect(await settle(clock, gone)).toBe(true);
  });

  it('says gone when the engine already removed the cgroup (v2 host)', async () => {
    const t = tree({ v1: false, cgroupPath: `/system.slice/docker-${ID}.scope` });
    t.setProcess(200);
    t.setProcs([200]);
    const clock = new FakeClock();
    const tracker = await new CgroupExitWatch(clock, t.proc, t.cg).track(ID, 200);
    expect(tracker).toBeDefined();
    const gone = tracker!.gone(new AbortController().signal);
    expect(await pending(gone)).toBe(true);
    rmSync(t.group, { recursive: true });
    expect(await settle(clock, gone)).toBe(true);
  });

  it('cannot tell (undefined) when the cgroup does not name the container, does not list the pid, or /proc lacks it', async () => {
    const clock = new FakeClock();
    const other = tree({ cgroupPath: '/docker/somebody-else' });
    other.setProcess(300);
    other.setProcs([300]);
    expect(await new CgroupExitWatch(clock, other.proc, other.cg).track(ID, 300)).toBeUndefined();

    const unlisted = tree();
    unlisted.setProcess(301);
    unlisted.setProcs([999]);
    expect(await new CgroupExitWatch(clock, unlisted.proc, unlisted.cg).track(ID, 301)).toBeUndefined();

    const t = tree();
    expect(await new CgroupExitWatch(clock, t.proc, t.cg).track(ID, 302)).toBeUndefined();
    expect(await new CgroupExitWatch(clock, t.proc, t.cg).track(ID, 0)).toBeUndefined();
  });

  it('stops watching when aborted, answering false', async () => {
    const t = tree();
    t.setProcess(400);
    t.setProcs([400]);
    const tracker = await new CgroupExitWatch(new FakeClock(), t.proc, t.cg).track(ID, 400);
    const ctl = new AbortController();
    const gone = tracker!.gone(ctl.signal);
    await flush();
    ctl.abort();
    expect(await gone).toBe(false);
  });
});
