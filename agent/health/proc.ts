/**
 * Reading a container's processes and sockets from the host's /proc: the
 * process tree under its init PID, its cgroup, a process's socket inodes and
 * its network namespace's TCP tables. Synchronous: /proc reads never wait on
 * the network.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Which container a scan looks in: its id (for the cgroup) and the host PID of its init. */
export interface ProcTarget {
  readonly containerId: string;
  readonly pid: number;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Descendants of pid (pid included), through /proc/<pid>/task/<tid>/children. */
function descendants(root: number, limit = 100_000): number[] {
  const out: number[] = [];
  const stack = [root];
  while (stack.length && out.length < limit) {
    const p = stack.pop() as number;
    out.push(p);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      const kids = read(`/proc/${p}/task/${t}/children`);
      if (kids) for (const k of kids.split(' ')) if (k.trim()) stack.push(Number(k));
    }
  }
  return out;
}

function commOf(pid: number): string | undefined {
  return read(`/proc/${pid}/comm`)?.trimEnd();
}

/**
 * A process whose comm is `comm` (compared on its first 15 bytes, as the
 * kernel truncates) runs in the container: first among the descendants of the
 * container's init PID, then (for daemons reparented out of that tree) among
 * every process whose cgroup names the container id.
 */
export function findProcess(comm: string, target: ProcTarget): number | undefined {
  const want = comm.slice(0, 15);
  if (target.pid > 0) {
    for (const p of descendants(target.pid)) if (commOf(p) === want) return p;
  }
  if (!target.containerId) return undefined;
  for (const ent of readdirSync('/proc')) {
    const pid = Number(ent);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    if (commOf(pid) !== want) continue;
    if (read(`/proc/${pid}/cgroup`)?.includes(target.containerId)) return pid;
  }
  return undefined;
}

function cmdlineOf(pid: number): string[] {
  return (read(`/proc/${pid}/cmdline`) ?? '').split('\0').filter((a) => a !== '');
}

const baseName = (p: string): string => p.slice(p.lastIndexOf('/') + 1);

/**
 * True when the process is called `name`: its comm (first 15 bytes), or the
 * base name of its program or of its first argument (a script run by an
 * interpreter: `python3 /usr/bin/nova-compute`).
 */
function isNamed(pid: number, name: string): boolean {
  if (commOf(pid) === name.slice(0, 15)) return true;
  const argv = cmdlineOf(pid);
  return argv.slice(0, 2).some((a) => baseName(a) === name);
}

/** Every process of the container: the init tree, then others whose cgroup names the container. */
function containerPids(target: ProcTarget): number[] {
  const pids = new Set(target.pid > 0 ? descendants(target.pid) : []);
  if (target.containerId) {
    for (const ent of readdirSync('/proc')) {
      const pid = Number(ent);
      if (!Number.isInteger(pid) || pid <= 0 || pids.has(pid)) continue;
      if (read(`/proc/${pid}/cgroup`)?.includes(target.containerId)) pids.add(pid);
    }
  }
  return [...pids];
}

function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    let link: string;
    try {
      link = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m?.[1]) out.add(m[1]);
  }
  return out;
}

/** "0100007F:1628" (tcp) or 32 hex digits (tcp6), each 32-bit word little-endian -> "127.0.0.1:5672". */
function showAddress(hex: string): string {
  const [addr = '', port = '0'] = hex.split(':');
  const words = addr.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse().map((b) => parseInt(b, 16)));
  const hex16 = bytes.map((b) => b.toString(16).padStart(2, '0')).join('');
  const host = bytes.length === 4 ? bytes.join('.') : `[${(hex16.match(/.{4}/g) ?? []).join(':')}]`;
  return `${host}:${parseInt(port, 16)}`;
}

interface TcpEntry {
  readonly local: string;
  readonly remote: string;
}

/** ESTABLISHED (state 01) entries of the process's network namespace whose local or remote port is wanted, by inode. */
function establishedByInode(pid: number, ports: ReadonlySet<number>): Map<string, TcpEntry> {
  const out = new Map<string, TcpEntry>();
  for (const table of ['tcp', 'tcp6']) {
    const text = read(`/proc/${pid}/net/${table}`);
    if (!text) continue;
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
      const f = line.trim().split(/\s+/);
      const [, local, remote, st, , , , , , inode] = f;
      if (st !== '01' || !local || !remote || !inode || inode === '0') continue;
      const lport = parseInt(local.split(':')[1] ?? '', 16);
      const rport = parseInt(remote.split(':')[1] ?? '', 16);
      if (ports.has(lport) || ports.has(rport))
        out.set(inode, { local: showAddress(local), remote: showAddress(remote) });
    }
  }
  return out;
}

export interface EstablishedScan {
  /** The container's processes called by the name. */
  readonly pids: readonly number[];
  /** The first ESTABLISHED connection one of them holds on a wanted port. */
  readonly connection?: { readonly pid: number; readonly local: string; readonly remote: string };
}

/**
 * Kolla's healthcheck_port meaning: a process of the container called `name`
 * holds an ESTABLISHED TCP socket whose local or remote port is one of
 * `ports`. A listening socket does not count.
 */
export function findEstablished(name: string, ports: readonly number[], target: ProcTarget): EstablishedScan {
  const wanted = new Set(ports);
  const pids = containerPids(target).filter((p) => isNamed(p, name));
  const tables = new Map<string, Map<string, TcpEntry>>();
  for (const pid of pids) {
    const inodes = socketInodes(pid);
    if (inodes.size === 0) continue;
    let ns: string;
    try {
      ns = readlinkSync(`/proc/${pid}/ns/net`);
    } catch {
      ns = `pid:${pid}`;
    }
    let table = tables.get(ns);
    if (!table) {
      table = establishedByInode(pid, wanted);
      tables.set(ns, table);
    }
    for (const inode of inodes) {
      const e = table.get(inode);
      if (e) return { pids, connection: { pid, ...e } };
    }
  }
  return { pids };
}
