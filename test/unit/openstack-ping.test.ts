/**
 * The OpenStack e2e's ping report (test/e2e/openstack-ping.ts) and the
 * console watcher's stamped ping lines (ConsoleWatch in
 * test/e2e/openstack-e2e-harness.ts), on console text shaped like what
 * scripts/libvirt/guest/net prints.
 */
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConsoleWatch } from '../e2e/openstack-e2e-harness.js';
import { summarizeNsPing } from '../e2e/ns-ping.js';
import { GUEST_CMDLINE, pingReport, reportLines, VM_IPS, type PingSource } from '../e2e/openstack-ping.js';

const [A, B] = VM_IPS;
const ok = (host: number, seq: number, peer: string): string =>
  `${host.toFixed(3)} spcd-ping seq=${seq} peer=${peer} ok rtt_us=900 t_ms=${1000 + seq * 200}`;
const lost = (host: number, seq: number, peer: string): string =>
  `${host.toFixed(3)} spcd-ping seq=${seq} peer=${peer} lost t_ms=${1000 + seq * 200}`;
const source = (from: string, peer: string, lines: string[]): PingSource => ({
  from,
  peer,
  text: () => lines.join('\n'),
});

describe('pingReport', () => {
  it('counts both directions with no loss: the summary says 0 lost and one interval of gap', () => {
    const a = [0, 1, 2, 3].map((s) => ok(100 + s * 0.2, s, B));
    const b = [0, 1, 2].map((s) => ok(100 + s * 0.2, s, A));
    const r = pingReport(
      [source('vm-a', B, a), source('vm-b', A, b)],
      [{ name: 'step-1', from: 100, to: 101 }],
    );
    expect(r.summary).toBe('vm_ping_sent=7 vm_ping_lost=0 max_ping_gap_ms=200');
    expect(r.stepLines).toEqual(['ping_step step=step-1 duration_s=1.0 lost=0']);
    expect(reportLines(r).at(-1)).toBe('ping_outside_steps lost=0');
  });

  it('places each loss in the step it fell in, adding both directions, and one outside every step', () => {
    // vm-a: seq 2, 3 lost inside step-2 (replies at 110.0 and 111.0 around them).
    const a = [ok(105, 0, B), ok(110, 1, B), lost(111, 2, B), lost(111, 3, B), ok(111, 4, B)];
    // vm-b: seq 1 lost between the steps (host 107.5), seq 4 lost in step-2.
    const b = [
      ok(105, 0, A),
      lost(110, 1, A),
      ok(110, 2, A),
      ok(110.4, 3, A),
      lost(111, 4, A),
      ok(111, 5, A),
    ];
    const windows = [
      { name: 'step-1', from: 100, to: 106 },
      { name: 'step-2', from: 108, to: 112 },
    ];
    const r = pingReport([source('vm-a', B, a), source('vm-b', A, b)], windows);
    expect(r.lost).toBe(4);
    expect(r.sent).toBe(11);
    expect(r.lossesByWindow).toEqual({ outside: 1, 'step-1': 0, 'step-2': 3 });
    expect(r.stepLines).toEqual([
      'ping_step step=step-1 duration_s=6.0 lost=0',
      'ping_step step=step-2 duration_s=4.0 lost=3',
    ]);
    expect(r.summary).toBe('vm_ping_sent=11 vm_ping_lost=4 max_ping_gap_ms=600');
  });

  it("names the guest whose console has no line to its peer (another peer's lines do not count)", () => {
    expect(() => pingReport([source('vm-a', B, [ok(100, 0, '10.9.9.9')])], [])).toThrow(
      `no ping line from vm-a to ${B}`,
    );
  });

  it("adds the DHCP namespace's directions apart: ns_lost per step and outside, ns_ping_* in the summary", () => {
    // iputils lines from the namespace: to A, seq 3 lost inside step-2; to B, none lost.
    const reply = (t: number, ip: string, seq: number): string =>
      `[${t.toFixed(6)}] 64 bytes from ${ip}: icmp_seq=${seq} ttl=64 time=0.300 ms`;
    const toA = [
      reply(109.6, A, 1),
      reply(109.8, A, 2),
      '[110.200000] no answer yet for icmp_seq=3',
      reply(110.2, A, 4),
    ].join('\n');
    const toB = [1, 2, 3, 4].map((q) => reply(104.8 + q * 0.2, B, q)).join('\n');
    const windows = [
      { name: 'step-1', from: 100, to: 106 },
      { name: 'step-2', from: 108, to: 112 },
    ];
    const vm = [
      source(
        'vm-a',
        B,
        [0, 1].map((q) => ok(105 + q * 0.2, q, B)),
      ),
    ];
    const ns = [toA, toB].map((t, i) => ({ from: 'qdhcp-n', d: summarizeNsPing(t, VM_IPS[i]!, windows) }));
    const r = pingReport(vm, windows, ns);
    expect(r).toMatchObject({ nsSent: 8, nsLost: 1, lost: 0 });
    expect(r.stepLines).toEqual([
      'ping_step step=step-1 duration_s=6.0 lost=0 ns_lost=0',
      'ping_step step=step-2 duration_s=4.0 lost=0 ns_lost=1',
    ]);
    expect(r.summary).toBe('vm_ping_sent=2 vm_ping_lost=0 max_ping_gap_ms=200 ns_ping_sent=8 ns_ping_lost=1');
    const lines = reportLines(r);
    expect(lines).toContain(
      `ping from=qdhcp-n peer=${A} sent=4 ok=3 lost=1 missing=0 restarts=0 max_gap_ms=400 losses=step-2:1`,
    );
    expect(lines.at(-1)).toBe('ping_outside_steps lost=0 ns_lost=0');
    // Without the namespace's directions, the lines stay as they were.
    expect(pingReport(vm, windows).summary).toBe('vm_ping_sent=2 vm_ping_lost=0 max_ping_gap_ms=200');
  });

  it('the guest command line names both peers', () => {
    expect(GUEST_CMDLINE).toContain(`spcd.peer=${A},${B}`);
  });
});

describe('ConsoleWatch', () => {
  let dir = '';
  let w: ConsoleWatch | undefined;
  afterEach(() => {
    w?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('stamps the ping lines with host seconds (a counter run into one too), and keeps counting', () => {
    dir = mkdtempSync(join(tmpdir(), 'spcd-cw-'));
    const file = join(dir, 'console.log');
    writeFileSync(file, `counter 0\r\nspcd-ping peer=${B} start interval_ms=200\r\n`);
    w = new ConsoleWatch(file);
    const t0 = Date.now() / 1000;
    w.poll();
    appendFileSync(
      file,
      `spcd-ping seq=0 peer=${B} ok rtt_us=5 t_ms=900\r\ncounter 1spcd-ping seq=1 peer=${B} lost t_ms=1100\r\nspcd-pi`,
    );
    w.poll();
    const t1 = Date.now() / 1000;
    expect(w.last()).toBe(1);
    expect(w.pings).toHaveLength(3);
    expect(w.pings[1]).toMatch(
      new RegExp(`^\\d+\\.\\d{3} spcd-ping seq=0 peer=${B.replace(/\./g, '\\.')} ok rtt_us=5 t_ms=900$`),
    );
    expect(w.pings[2]).toMatch(/ spcd-ping seq=1 peer=\S+ lost t_ms=1100$/);
    for (const l of w.pings) {
      const s = Number(l.split(' ')[0]);
      expect(s).toBeGreaterThanOrEqual(Math.floor(t0 * 1000) / 1000);
      expect(s).toBeLessThanOrEqual(t1 + 0.001);
    }
    appendFileSync(file, `ng seq=2 peer=${B} ok rtt_us=5 t_ms=1300\r\n`);
    w.poll();
    expect(w.pingText().split('\n').at(-1)).toMatch(/ spcd-ping seq=2 peer=\S+ ok rtt_us=5 t_ms=1300$/);
  });
});
