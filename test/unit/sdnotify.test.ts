import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { SdNotify } from '../../agent/daemon/sdnotify.js';

// A real AF_UNIX datagram receiver, as PID 1's notify socket is: it prints each
// message with the sender's credentials, and closes passed fds (the barrier
// systemd-notify waits on).
const RECEIVER = String.raw`
import json, os, socket, struct, sys
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
    print(json.dumps({"data": data.decode(), "pid": pid}), flush=True)
`;

const havePython = spawnSync('python3', ['-c', 'print(1)']).status === 0;
const haveNotify = spawnSync('systemd-notify', ['--version']).status === 0;
if (!havePython || !haveNotify)
  console.warn(`[sdnotify] skipping the datagram tests: python3=${havePython} systemd-notify=${haveNotify}`);

interface Msg {
  data: string;
  pid: number | null;
}

let child: ChildProcess | undefined;
afterEach(() => {
  child?.kill('SIGKILL');
  child = undefined;
});

async function receiver(addr: string): Promise<{ messages: Msg[]; until: (n: number) => Promise<void> }> {
  child = spawn('python3', ['-c', RECEIVER, addr], { stdio: ['ignore', 'pipe', 'inherit'] });
  const messages: Msg[] = [];
  let wake: (() => void) | undefined;
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  createInterface(child.stdout!).on('line', (line) => {
    const v = JSON.parse(line) as Msg & { ready?: boolean };
    if (v.ready) return ready();
    messages.push(v);
    wake?.();
  });
  await isReady;
  return {
    messages,
    until: async (n) => {
      const end = Date.now() + 8000;
      while (messages.length < n) {
        if (Date.now() > end) throw new Error(`only ${messages.length} of ${n} messages arrived`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 50);
        });
      }
    },
  };
}

describe('SdNotify', () => {
  it('is a no-op without NOTIFY_SOCKET', async () => {
    const n = new SdNotify({}, { bin: '/nonexistent/systemd-notify' });
    expect(n.enabled).toBe(false);
    n.ready('x');
    n.watchdog();
    await n.flush();
    expect(n.failures).toBe(0);
  });

  it('watchdogIntervalMs is half of WATCHDOG_USEC, only for this PID', () => {
    expect(new SdNotify({ WATCHDOG_USEC: '30000000' }).watchdogIntervalMs()).toBe(15_000);
    expect(
      new SdNotify({ WATCHDOG_USEC: '30000000', WATCHDOG_PID: String(process.pid) }).watchdogIntervalMs(),
    ).toBe(15_000);
    expect(
      new SdNotify({ WATCHDOG_USEC: '30000000', WATCHDOG_PID: '1' }).watchdogIntervalMs(),
    ).toBeUndefined();
    expect(new SdNotify({}).watchdogIntervalMs()).toBeUndefined();
    expect(new SdNotify({ WATCHDOG_USEC: 'zero' }).watchdogIntervalMs()).toBeUndefined();
  });

  it.skipIf(!havePython || !haveNotify)(
    'sends READY, STATUS, WATCHDOG and STOPPING datagrams to a path socket, credited to spcd',
    async () => {
      const path = join(mkdtempSync(join(tmpdir(), 'spcd-notify-')), 'notify.sock');
      const rx = await receiver(path);
      const n = new SdNotify({ ...process.env, NOTIFY_SOCKET: path });
      n.ready('adopted 2 sets');
      n.status('reconciling');
      n.watchdog();
      n.stopping();
      await n.flush();
      // each message is followed by BARRIER=1: systemd-notify waited until it was taken
      await rx.until(8);
      const texts = rx.messages.map((m) => m.data).filter((t) => t !== 'BARRIER=1');
      expect(rx.messages.filter((m) => m.data === 'BARRIER=1')).toHaveLength(4);
      expect(texts[0]).toContain('READY=1');
      expect(texts[0]).toContain('STATUS=adopted 2 sets');
      expect(texts[0]).toContain(`MAINPID=${process.pid}`);
      expect(texts[1]).toContain('STATUS=reconciling');
      expect(texts[2]).toContain('WATCHDOG=1');
      expect(texts[3]).toContain('STOPPING=1');
      expect(n.failures).toBe(0);
      // As root, systemd-notify sends with the PID of spcd, not its own.
      if (process.getuid?.() === 0)
        for (const m of rx.messages.filter((x) => x.data !== 'BARRIER=1'))
          expect(m.pid, m.data).toBe(process.pid);
    },
    20_000,
  );

  it.skipIf(!havePython || !haveNotify)(
    'reaches an abstract (@) socket, and coalesces watchdog pings',
    async () => {
      const addr = `@spcd-test-${process.pid}-${Date.now()}`;
      const rx = await receiver(addr);
      const n = new SdNotify({ ...process.env, NOTIFY_SOCKET: addr });
      n.ready();
      for (let i = 0; i < 20; i++) n.watchdog(); // a burst while one is in flight
      await n.flush();
      await rx.until(4);
      const dogs = rx.messages.filter((m) => m.data.includes('WATCHDOG=1'));
      expect(dogs.length).toBeGreaterThanOrEqual(1);
      expect(dogs.length).toBeLessThanOrEqual(2);
    },
    20_000,
  );

  it('counts a failed send (helper missing) without throwing', async () => {
    const n = new SdNotify({ NOTIFY_SOCKET: '/nonexistent.sock' }, { bin: '/nonexistent/systemd-notify' });
    n.ready();
    await n.flush();
    expect(n.failures).toBe(1);
  });
});
