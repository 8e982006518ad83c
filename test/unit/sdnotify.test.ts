import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SdNotify } from '../../agent/host/sdnotify.js';
import { canReceiveNotify, notifyReceiver, type NotifyReceiver } from '../support/notify-receiver.js';

if (!canReceiveNotify)
  console.warn('[sdnotify] skipping the datagram tests: python3 or systemd-notify missing');

let rx: NotifyReceiver | undefined;
afterEach(() => {
  rx?.close();
  rx = undefined;
});

async function receiver(addr: string): Promise<NotifyReceiver> {
  rx = await notifyReceiver(addr);
  return rx;
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

  it.skipIf(!canReceiveNotify)(
    'sends READY, STATUS, WATCHDOG, STOPPING and EXTEND_TIMEOUT_USEC datagrams to a path socket, credited to spcd',
    async () => {
      const path = join(mkdtempSync(join(tmpdir(), 'spcd-notify-')), 'notify.sock');
      const rx = await receiver(path);
      const n = new SdNotify({ ...process.env, NOTIFY_SOCKET: path });
      n.ready('adopted 2 sets');
      n.status('reconciling');
      n.watchdog();
      n.stopping();
      n.extendTimeout(180_000);
      await n.flush();
      // each message is followed by BARRIER=1: systemd-notify waited until it was taken
      await rx.until(10);
      const texts = rx.messages.map((m) => m.data).filter((t) => t !== 'BARRIER=1');
      expect(rx.messages.filter((m) => m.data === 'BARRIER=1')).toHaveLength(5);
      expect(texts[0]).toContain('READY=1');
      expect(texts[0]).toContain('STATUS=adopted 2 sets');
      expect(texts[0]).toContain(`MAINPID=${process.pid}`);
      expect(texts[1]).toContain('STATUS=reconciling');
      expect(texts[2]).toContain('WATCHDOG=1');
      expect(texts[3]).toContain('STOPPING=1');
      expect(texts[4]).toContain('EXTEND_TIMEOUT_USEC=180000000');
      expect(n.failures).toBe(0);
      // As root, systemd-notify sends with the PID of spcd, not its own.
      if (process.getuid?.() === 0)
        for (const m of rx.messages.filter((x) => x.data !== 'BARRIER=1'))
          expect(m.pid, m.data).toBe(process.pid);
    },
    20_000,
  );

  it.skipIf(!canReceiveNotify)(
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
