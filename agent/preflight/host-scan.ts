/** Small readers over /proc and /sys, rooted so tests can point them at a fake tree. */
import { access, readFile, readdir, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

export interface ProcInfo {
  readonly pid: number;
  readonly comm: string;
  readonly cgroup: string;
}

/** Processes whose comm is one of `names`, with their cgroup file. */
export async function findProcesses(procRoot: string, names: readonly string[]): Promise<ProcInfo[]> {
  let entries: string[];
  try {
    entries = await readdir(procRoot);
  } catch {
    return [];
  }
  const out: ProcInfo[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const comm = (await readText(join(procRoot, e, 'comm')))?.trim();
    if (!comm || !names.includes(comm)) continue;
    out.push({ pid: Number(e), comm, cgroup: (await readText(join(procRoot, e, 'cgroup'))) ?? '' });
  }
  return out;
}

/** True when a /proc/<pid>/cgroup places the process inside a container. */
export function inContainer(cgroup: string): boolean {
  return /\/docker[/-]|\/kubepods|\/containerd|\/libpod-|\/lxc\//.test(cgroup);
}

/** Free bytes for unprivileged users on the filesystem holding `path` (or its nearest existing parent). */
export async function freeBytesAt(path: string): Promise<number | undefined> {
  let p = path;
  for (;;) {
    try {
      const s = await statfs(p);
      return s.bavail * s.bsize;
    } catch {
      const up = dirname(p);
      if (up === p) return undefined;
      p = up;
    }
  }
}
