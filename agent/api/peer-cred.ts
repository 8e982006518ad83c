/**
 * Best-effort lookup of the uid of the process at the other end of a unix
 * socket connection. Node exposes no SO_PEERCRED, so this reads our socket's
 * inode from /proc/self/fd, asks `ss -xpn` (sock_diag) for the peer inode and
 * the process holding it, and reads that process's real uid from /proc.
 * Returns null whenever any step fails (no ss, not Linux, the client already
 * exited, a TCP connection): callers log null rather than guess.
 */
import { execFile } from 'node:child_process';
import { readFile, readlink } from 'node:fs/promises';
import type { Socket } from 'node:net';

export type PeerUidLookup = (socket: Socket) => Promise<number | null>;

const ROW = /^\S+\s+\S+\s+\d+\s+\d+\s+(\S+)\s+(\d+)\s+(\S+)\s+(\d+)(?:\s+users:\(\((.*)\)\))?/;

export const lookupPeerUid: PeerUidLookup = async (socket) => {
  try {
    const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (typeof fd !== 'number' || fd < 0) return null;
    const link = await readlink(`/proc/self/fd/${fd}`);
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (!m) return null;
    const ours = m[1];
    const table = await runSs();
    const rows = table.split('\n').map((l) => ROW.exec(l.trim()));
    const mine = rows.find((r) => r?.[2] === ours);
    const peerInode = mine?.[4];
    if (!peerInode || peerInode === '0') return null;
    const peer = rows.find((r) => r?.[2] === peerInode);
    const pid = peer?.[5] ? /pid=(\d+)/.exec(peer[5])?.[1] : undefined;
    if (!pid) return null;
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    return uid === undefined ? null : Number(uid);
  } catch {
    return null;
  }
};

function runSs(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ss', ['-xpnH'], { timeout: 2_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout) => {
      if (err) reject(err);
      else resolve(stdout);
    });
  });
}

/** For tests and non-Linux: never knows. */
export const noPeerUid: PeerUidLookup = () => Promise.resolve(null);
