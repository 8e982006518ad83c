import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { waitFor } from './wait.js';

// A real AF_UNIX datagram receiver, as PID 1's notify socket is: it prints each
// message with the sender's credentials and the time it arrived, and closes
// passed fds (the barrier systemd-notify waits on).
const RECEIVER = String.raw`
import json, os, socket, struct, sys, time
addr = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind('\0' + addr[1:] if addr.startswith('@') else addr)
print(json.dumps({"ready": True}), flush=True)
while True:
    data, anc, flags, _ = s.recvmsg(4096, socket.CMSG_SPACE(64))
    pid = None
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack('iII', payload[:12])[0]
        elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            for i in range(0, len(payload) - len(payload) % 4, 4):
                os.close(struct.unpack('i', payload[i:i+4])[0])
    print(json.dumps({"data": data.decode(), "pid": pid, "at": time.time() * 1000}), flush=True)
`;

/** python3 and systemd-notify are both needed to receive what spcd sends. */
export const canReceiveNotify =
  spawnSync('python3', ['-c', 'print(1)']).status === 0 &&
  spawnSync('systemd-notify', ['--version']).status === 0;

export interface NotifyMessage {
  readonly data: string;
  readonly pid: number | null;
  /** Wall-clock ms when the datagram arrived. */
  readonly at: number;
}

export interface NotifyReceiver {
  readonly messages: NotifyMessage[];
  /** Resolves once n messages arrived; rejects after timeoutMs. */
  until(n: number, timeoutMs?: number): Promise<void>;
  close(): void;
}

/** Binds a datagram socket at addr (a path, or an abstract name starting with '@'). */
export async function notifyReceiver(addr: string): Promise<NotifyReceiver> {
  const child: ChildProcess = spawn('python3', ['-c', RECEIVER, addr], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const messages: NotifyMessage[] = [];
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  createInterface(child.stdout!).on('line', (line) => {
    const v = JSON.parse(line) as NotifyMessage & { ready?: boolean };
    if (v.ready) return ready();
    messages.push(v);
  });
  await isReady;
  return {
    messages,
    until: async (n, timeoutMs = 8000) => {
      await waitFor(`${n} messages`, () => messages.length >= n, { timeoutMs }).catch(() => {
        throw new Error(`only ${messages.length} of ${n} messages arrived`);
      });
    },
    close: () => void child.kill('SIGKILL'),
  };
}
