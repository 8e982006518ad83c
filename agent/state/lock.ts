/**
 * One spcd per state directory. Node has no flock(2), so the lock is a file,
 * `<state-dir>/spcd.lock`, naming the owner's PID and its start time (field
 * 22 of /proc/PID/stat). It is written to a temp file and hard-linked into
 * place, so it appears whole or not at all and link() fails if it exists.
 *
 * A lock whose PID is gone, a zombie, or now a different process (another
 * start time: the PID was reused) is stale: a SIGKILLed spcd never blocks its
 * own restart. See docs/decisions/0009-state-dir-lock.md for the limits
 * (one PID namespace; two spcds breaking the same stale lock at once).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import { ensureDir, writeFileAtomic } from './atomic.js';

export interface LockOwner {
  readonly pid: number;
  /** Clock ticks since boot when the process started; null when unknown. */
  readonly startTime: number | null;
}

/** How to look at a process; the real one reads /proc. */
export interface ProcessTable {
  /** The start time of a live (not zombie) process, or undefined when there is none. */
  startTime(pid: number): number | null | undefined;
}

export const procTable: ProcessTable = {
  startTime(pid) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return undefined;
    }
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses; the fields follow the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    const start = Number(fields[19]);
    return Number.isFinite(start) ? start : null;
  },
};

export class StateDirLock {
  private readonly path: string;
  private ours: LockOwner | undefined;

  constructor(
    private readonly dir: string,
    private readonly procs: ProcessTable = procTable,
    private readonly pid: number = process.pid,
  ) {
    this.path = join(dir, 'spcd.lock');
  }

  /** Takes the lock or throws STATE_LOCKED naming the directory and the live owner's PID. */
  async acquire(): Promise<void> {
    await ensureDir(this.dir);
    const me: LockOwner = { pid: this.pid, startTime: this.procs.startTime(this.pid) ?? null };
    const tmp = join(this.dir, `.spcd.lock.${this.pid}.${randomBytes(4).toString('hex')}`);
    await writeFileAtomic(tmp, `${JSON.stringify(me)}\n`, 0o644);
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await link(tmp, this.path);
          this.ours = me;
          return;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw err;
        }
        const owner = await this.readOwner();
        if (owner && this.alive(owner)) {
          throw new SpcdError(
            'STATE_LOCKED',
            `state directory ${this.dir} is in use by another spcd (PID ${owner.pid}); refusing to share it`,
            { stateDir: this.dir, pid: owner.pid, lockFile: this.path },
          );
        }
        // Stale: its owner is gone (a SIGKILL, a crash, a reboot). Break it and try again.
        await unlink(this.path).catch(() => undefined);
      }
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  /** Removes the lock if it is still ours. */
  async release(): Promise<void> {
    const me = this.ours;
    if (!me) return;
    this.ours = undefined;
    const owner = await this.readOwner();
    if (owner && owner.pid === me.pid && owner.startTime === me.startTime)
      await unlink(this.path).catch(() => undefined);
  }

  private async readOwner(): Promise<LockOwner | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch {
      return undefined;
    }
    try {
      const v = JSON.parse(text) as { pid?: unknown; startTime?: unknown };
      if (typeof v.pid !== 'number' || !Number.isInteger(v.pid) || v.pid <= 0) return undefined;
      return { pid: v.pid, startTime: typeof v.startTime === 'number' ? v.startTime : null };
    } catch {
      return undefined; // unreadable garbage is nobody's lock
    }
  }

  private alive(h: LockOwner): boolean {
    if (h.pid === this.pid) return false; // that was an earlier process with our PID
    const now = this.procs.startTime(h.pid);
    if (now === undefined) return false;
    return h.startTime === null || now === null || now === h.startTime;
  }
}
