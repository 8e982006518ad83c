/**
 * The parser of the e2e guest's ping lines (test/e2e/ping-log.ts), on console
 * text shaped like what scripts/libvirt/guest/net prints (taken from a real
 * run, then cut and edited for each case).
 */
import { describe, expect, it } from 'vitest';
import { formatPing, parsePingLines, summarizePing } from '../e2e/ping-log.js';

const RAW = [
  '[    0.000000] ACPI BIOS Error (bug): A valid RSDP was not found (20220331/tbxfroot-210)\r',
  'spcd-e2e guest up: 6.1.0-56-cloud-amd64\r',
  'counter 0\r',
  'spcd-net eth0 up mac=52:54:00:fb:00:0c\r',
  'spcd-net dhcp bound ip=10.251.0.12/24 lease=3600\r',
  'spcd-ping peer=10.251.0.11 start interval_ms=200\r',
  'spcd-ping seq=0 peer=10.251.0.11 ok rtt_us=2617 t_ms=2050\r',
  'spcd-ping seq=1 peer=10.251.0.11 ok rtt_us=2135 t_ms=2250\r',
  'counter 1\r',
  'spcd-ping seq=2 peer=10.251.0.11 ok rtt_us=4036 t_ms=2460\r',
  'spcd-ping seq=3 peer=10.251.0.11 ok rtt_us=1655 t_ms=2660\r',
  '',
].join('\n');

describe('parsePingLines', () => {
  it('takes the ping lines of a raw console log and nothing else', () => {
    const lines = parsePingLines(RAW);
    expect(lines.map((l) => l.seq)).toEqual([0, 1, 2, 3]);
    expect(lines[0]).toEqual({ seq: 0, peer: '10.251.0.11', ok: true, rttUs: 2617, guestMs: 2050 });
  });

  it('reads a lost line, a host stamp, and a line the console ran into a counter line', () => {
    const lines = parsePingLines(
      [
        '1795500900.125 spcd-ping seq=7 peer=10.251.0.12 lost t_ms=19840',
        'counter 12spcd-ping seq=8 peer=10.251.0.12 ok rtt_us=10 t_ms=20040\r',
      ].join('\n'),
    );
    expect(lines).toEqual([
      { seq: 7, peer: '10.251.0.12', ok: false, guestMs: 19840, hostS: 1795500900.125 },
      { seq: 8, peer: '10.251.0.12', ok: true, rttUs: 10, guestMs: 20040 },
    ]);
  });
});

describe('summarizePing', () => {
  it('counts a clean run: sent = replies, nothing lost, the gap is one interval', () => {
    const [d, ...rest] = summarizePing(RAW);
    expect(rest).toEqual([]);
    expect(d).toMatchObject({ peer: '10.251.0.11', sent: 4, ok: 4, lost: 0, missing: 0, restarts: 0 });
    expect(d?.maxGapMs).toBe(210);
    expect(d?.maxGapEndMs).toBe(2460);
    expect(formatPing('vm-b', d!)).toBe(
      'ping from=vm-b peer=10.251.0.11 sent=4 ok=4 lost=0 missing=0 restarts=0 max_gap_ms=210 losses=none',
    );
  });

  it('places losses in host time between the replies around them, and a trailing one by the guest clock', () => {
    // Guest ms 1000 ~ host 1000.0 (offset 999 s, the fastest line); later stamps arrived late.
    const text = [
      '1000.000 spcd-ping seq=0 peer=p ok rtt_us=1 t_ms=1000',
      '1000.500 spcd-ping seq=1 peer=p ok rtt_us=1 t_ms=1200',
      '1001.900 spcd-ping seq=2 peer=p lost t_ms=1400',
      '1001.900 spcd-ping seq=3 peer=p lost t_ms=1600',
      '1001.900 spcd-ping seq=4 peer=p ok rtt_us=1 t_ms=1800',
      '1003.100 spcd-ping seq=5 peer=p lost t_ms=3000',
      '1003.300 spcd-ping seq=6 peer=p ok rtt_us=1 t_ms=3200',
      '1003.500 spcd-ping seq=7 peer=p lost t_ms=3400',
    ].join('\n');
    const [d] = summarizePing(text, [
      { name: 'upgrade-nova_libvirt', from: 1000.8, to: 1001.5 },
      { name: 'restart-nova_compute', from: 1002.5, to: 1002.7 },
    ]);
    expect(d?.offsetS).toBeCloseTo(999, 6);
    expect(d?.lostSeqs).toEqual([2, 3, 5, 7]);
    // seq 2, 3: a third and two thirds of the way from seq 1 (1000.5) to seq 4 (1001.9);
    // seq 5: half-way from seq 4 to seq 6 (1003.3); seq 7: no reply after it, 3.4 s + 999.
    expect(d?.lostAtS.map((x) => Number(x.toFixed(3)))).toEqual([1000.967, 1001.433, 1002.6, 1002.4]);
    expect(d?.lossesByWindow).toEqual({ outside: 1, 'upgrade-nova_libvirt': 2, 'restart-nova_compute': 1 });
    expect(d).toMatchObject({ sent: 8, ok: 4, lost: 4, missing: 0, maxGapMs: 1400, maxGapEndMs: 3200 });
    expect(formatPing('a', d!)).toContain('losses=outside:1,upgrade-nova_libvirt:2,restart-nova_compute:1');
  });

  it('counts a sequence number with no line as lost (missing), and a restart of the pinger', () => {
    const text = [
      'spcd-ping seq=0 peer=p ok rtt_us=1 t_ms=100',
      'spcd-ping seq=1 peer=p ok rtt_us=1 t_ms=300',
      'spcd-ping seq=1 peer=p ok rtt_us=1 t_ms=300',
      'spcd-ping seq=4 peer=p ok rtt_us=1 t_ms=900',
      'spcd-ping seq=0 peer=p ok rtt_us=1 t_ms=50',
      'spcd-ping seq=1 peer=p lost t_ms=250',
      'spcd-ping seq=2 peer=p ok rtt_us=1 t_ms=450',
    ].join('\n');
    const [d] = summarizePing(text);
    expect(d).toMatchObject({ sent: 8, ok: 5, lost: 3, missing: 2, restarts: 1, lostSeqs: [1] });
    // The gap across the restart is not a gap between two replies of one run.
    expect(d?.maxGapMs).toBe(600);
    expect(d?.lossesByWindow).toEqual({ outside: 0 });
    expect(d?.lostAtS).toEqual([]);
  });

  it('keeps each direction apart when one guest pings two peers', () => {
    const text = [
      'spcd-ping seq=0 peer=10.0.0.2 ok rtt_us=1 t_ms=100',
      'spcd-ping seq=0 peer=10.0.0.3 ok rtt_us=1 t_ms=110',
      'spcd-ping seq=1 peer=10.0.0.3 lost t_ms=310',
      'spcd-ping seq=1 peer=10.0.0.2 ok rtt_us=1 t_ms=300',
      'spcd-ping seq=2 peer=10.0.0.3 ok rtt_us=1 t_ms=510',
    ].join('\n');
    expect(summarizePing(text).map((d) => [d.peer, d.sent, d.lost])).toEqual([
      ['10.0.0.2', 2, 0],
      ['10.0.0.3', 3, 1],
    ]);
  });

  it('says why windows cannot be used on an unstamped log, and refuses a reversed window', () => {
    expect(() => summarizePing(RAW, [{ name: 'w', from: 1, to: 2 }])).toThrow(
      /peer 10\.251\.0\.11: time windows need host-stamped lines/,
    );
    expect(() => summarizePing(RAW, [{ name: 'w', from: 3, to: 2 }])).toThrow(
      /ping window w: from 3 is after to 2/,
    );
  });

  it('finds nothing in a log without ping lines (a guest without a NIC)', () => {
    expect(summarizePing('spcd-e2e guest up: 6.1.0\r\ncounter 0\r\ncounter 1\r\n')).toEqual([]);
  });
});
