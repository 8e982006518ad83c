import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { procTable, StateDirLock, type ProcessTable } from '../../agent/state/lock.js';

const dir = (): string => join(mkdtempSync(join(tmpdir(), 'spcd-lock-')), 'state');

/** A process table with fixed entries: pid -> start time. */
const table = (entries: Record<number, number>): ProcessTable => ({
  startTime: (pid) => entries[pid],
});

describe('StateDirLock', () => {
  it('a second holder is refused with STATE_LOCKED naming the directory and the PID', async () => {
    const d = dir();
    const procs = table({ 100: 5, 200: 7 });
    await new StateDirLock(d, procs, 100).acquire();
    const err = await new StateDirLock(d, procs, 200).acquire().catch((e: unknown) => e);
    expect(isSpcdError(err, 'STATE_LOCKED')).toBe(true);
    expect((err as Error).message).toContain(d);
    expect((err as Error).message).toContain('PID 100');
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8'))).toEqual({ pid: 100, startTime: 5 });
  });

  it('breaks a lock whose PID is gone, or reused by another process', async () => {
    const d = dir();
    await new StateDirLock(d, table({ 100: 5 }), 100).acquire();
    // 100 died (SIGKILL): nothing released the file.
    await new StateDirLock(d, table({ 200: 7 }), 200).acquire();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8'))).toEqual({ pid: 200, startTime: 7 });
    // 200 died and its PID now belongs to a process started later.
    await new StateDirLock(d, table({ 200: 99, 300: 8 }), 300).acquire();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8')).pid).toBe(300);
  });

  it('a lock with our own PID is an earlier life of this PID (a container restarted as PID 1)', async () => {
    const d = dir();
    await new StateDirLock(d, table({ 1: 5 }), 1).acquire();
    await new StateDirLock(d, table({ 1: 9 }), 1).acquire();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8'))).toEqual({ pid: 1, startTime: 9 });
  });

  it('garbage in the lock file locks nothing', async () => {
    const d = dir();
    await new StateDirLock(d, table({}), 100).acquire();
    writeFileSync(join(d, 'spcd.lock'), 'not json');
    await new StateDirLock(d, table({ 200: 1 }), 200).acquire();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8')).pid).toBe(200);
  });

  it('release removes only our own lock', async () => {
    const d = dir();
    const a = new StateDirLock(d, table({ 100: 5 }), 100);
    await a.acquire();
    await a.release();
    expect(existsSync(join(d, 'spcd.lock'))).toBe(false);
    const b = new StateDirLock(d, table({ 100: 5 }), 100);
    await b.acquire();
    writeFileSync(join(d, 'spcd.lock'), JSON.stringify({ pid: 200, startTime: 1 }));
    await b.release();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8')).pid).toBe(200);
  });

  it('the real process table: a live owner counts, a reaped one does not', async () => {
    expect(procTable.startTime(process.pid)).toBeGreaterThan(0);
    const child = spawn('sleep', ['30']);
    const pid = child.pid!;
    const d = dir();
    await new StateDirLock(d, procTable, pid).acquire();
    const err = await new StateDirLock(d, procTable, process.pid).acquire().catch((e: unknown) => e);
    expect(isSpcdError(err, 'STATE_LOCKED')).toBe(true);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    await new StateDirLock(d, procTable, process.pid).acquire();
    expect(JSON.parse(readFileSync(join(d, 'spcd.lock'), 'utf8')).pid).toBe(process.pid);
  });
});
