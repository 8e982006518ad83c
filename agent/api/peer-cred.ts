/**
 * Who is at the other end of a unix socket connection: the kernel's answer
 * to getsockopt(SO_PEERCRED), the uid, gid and pid of the process that
 * connected, as they were at connect(). The client cannot choose them (only
 * root may pass other credentials), unlike anything read from /proc or `ss`
 * afterwards (decision 0041).
 *
 * Node has no getsockopt: koffi (a maintained FFI with prebuilt binaries in
 * its package) calls libc's. Where libc cannot be loaded (not Linux, not
 * glibc), the lookup answers null, and callers log null rather than guess.
 */
import koffi from 'koffi';
import type { Socket } from 'node:net';

export interface PeerCred {
  readonly uid: number;
  readonly gid: number;
  readonly pid: number;
}

export type PeerCredLookup = (socket: Socket) => PeerCred | null;

const SOL_SOCKET = 1;
const SO_PEERCRED = 17;
/** struct ucred { pid_t pid; uid_t uid; gid_t gid; } on Linux. */
const UCRED_BYTES = 12;

type GetSockOpt = (fd: number, level: number, name: number, value: Buffer, length: number[]) => number;

/** libc's getsockopt, or null where it cannot be loaded. */
function loadGetSockOpt(): GetSockOpt | null {
  if (process.platform !== 'linux') return null;
  try {
    const libc = koffi.load('libc.so.6');
    return libc.func(
      'int getsockopt(int fd, int level, int name, _Out_ uint8_t *value, _Inout_ uint32_t *length)',
    ) as GetSockOpt;
  } catch {
    return null;
  }
}

/** A lookup that asks the kernel; each handler makes its own (libc is loaded once per lookup). */
export function createPeerCredLookup(): PeerCredLookup {
  let getsockopt: GetSockOpt | null | undefined;
  const value = Buffer.alloc(UCRED_BYTES);
  return (socket) => {
    getsockopt ??= loadGetSockOpt();
    const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (getsockopt === null || typeof fd !== 'number' || fd < 0) return null;
    const length = [UCRED_BYTES];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, value, length) !== 0 || length[0] !== UCRED_BYTES)
      return null;
    return { pid: value.readInt32LE(0), uid: value.readUInt32LE(4), gid: value.readUInt32LE(8) };
  };
}

/** For tests and non-Linux: never knows. */
export const noPeerCred: PeerCredLookup = () => null;
