/**
 * The namespace pinger (test/e2e/ns-ping.ts): its parser on iputils output
 * captured from real runs (test/fixtures/ns-ping/README.md says how), and its
 * processes: started, counted, stopped with none left behind.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  NsPinger,
  nsPingArgv,
  parseNsPing,
  pingProcesses,
  summarizeNsPing,
  type NsPingOptions,
} from '../e2e/ns-ping.js';
import { formatPing } from '../e2e/ping-log.js';
import { REPO } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';

const fixture = (name: string): string => readFileSync(join(REPO, 'test/fixtures/ns-ping', name), 'utf8');
const DROP = fixture('drop-5.out');
const LATE = fixture('late-and-lost.out');
const UNREACHABLE = fixture('unreachable.out');
const PEER = '10.253.7.2';

describe('parseNsPing', () => {
  it('reads a reply: number, host stamp (ms) and round trip; skips the header and the statistics', () => {
    const lines = parseNsPing(DROP, PEER);
    expect(lines[0]).toEqual({
      seq: 1,
      peer: PEER,
      ok: true,
      rttUs: 974,
      guestMs: 1795507375307,
      hostS: 1795507375.306838,
    });
    expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: 73 }, (_, i) => i + 1));
  });

  it('an unanswered number is a lost line at its first "no answer yet" stamp', () => {
    const l31 = parseNsPing(DROP, PEER).find((l) => l.seq === 31);
    expect(l31).toEqual({ seq: 31, peer: PEER, ok: false, guestMs: 1795507381632, hostS: 1795507381.632318 });
  });

  it('a late reply (after its "no answer yet") is a reply, at the stamp it came (iputils prints whole ms past 100)', () => {
    const l4 = parseNsPing(LATE, PEER).find((l) => l.seq === 4);
    expect(l4).toMatchObject({ ok: true, rttUs: 1304000, hostS: 1795507407.676471 });
  });

  it('no reply at all gives no line; a reply from another address is not a reply', () => {
    expect(parseNsPing(UNREACHABLE, '10.253.7.3')).toEqual([]);
    expect(parseNsPing(DROP, '10.253.7.9')).toEqual([]);
  });

  it('unwraps the 16-bit icmp_seq', () => {
    const text = [
      '[100.000000] 64 bytes from 10.0.0.2: icmp_seq=65534 ttl=64 time=0.05 ms',
      '[100.200000] 64 bytes from 10.0.0.2: icmp_seq=65535 ttl=64 time=0.05 ms',
      '[100.400000] no answer yet for icmp_seq=0',
      '[100.600000] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.05 ms',
    ].join('\n');
    expect(parseNsPing(text, '10.0.0.2').map((l) => [l.seq, l.ok])).toEqual([
      [65534, true],
      [65535, true],
      [65536, false],
      [65537, true],
    ]);
    expect(summarizeNsPing(text, '10.0.0.2')).toMatchObject({ sent: 4, ok: 3, lost: 1, restarts: 0 });
  });
});

describe('summarizeNsPing', () => {
  it("counts the five dropped probes as ping's own statistics do (73 sent, 68 received) and places them", () => {
    const d = summarizeNsPing(DROP, PEER, [
      { name: 'before', from: 1795507375, to: 1795507381.3 },
      { name: 'drop', from: 1795507381.3, to: 1795507382.45 },
    ]);
    expect(d).toMatchObject({ sent: 73, ok: 68, lost: 5, missing: 0, restarts: 0 });
    expect(d.lostSeqs).toEqual([31, 32, 33, 34, 35]);
    expect(d.lossesByWindow).toEqual({ outside: 0, before: 0, drop: 5 });
    // From reply 30 (381.224374) to reply 36 (382.448429).
    expect(d.maxGapMs).toBe(1224);
    expect(formatPing('qdhcp', d)).toBe(
      'ping from=qdhcp peer=10.253.7.2 sent=73 ok=68 lost=5 missing=0 restarts=0 max_gap_ms=1224 losses=drop:5',
    );
  });

  it("late replies are not lost; the queued probes dropped are (21 sent, 14 received, as ping's statistics)", () => {
    const d = summarizeNsPing(LATE, PEER);
    expect(d).toMatchObject({ sent: 21, ok: 14, lost: 7, missing: 0 });
    expect(d.lostSeqs).toEqual([5, 6, 7, 8, 9, 10, 11]);
    expect(d.lossesByWindow).toEqual({ outside: 7 });
  });

  it('a number with no line at all is missing, and lost', () => {
    const cut = DROP.split('\n')
      .filter((l) => !l.includes('icmp_seq=50 '))
      .join('\n');
    expect(summarizeNsPing(cut, PEER)).toMatchObject({ sent: 73, ok: 67, lost: 6, missing: 1 });
  });

  it('probes after the last reply are still in flight: not counted yet', () => {
    const head = DROP.split('\n').slice(0, 34).join('\n'); // through "no answer yet for icmp_seq=33"
    expect(head.trimEnd().endsWith('no answer yet for icmp_seq=33')).toBe(true);
    expect(summarizeNsPing(head, PEER)).toMatchObject({ sent: 30, ok: 30, lost: 0 });
  });

  it('a target that never answered: nothing counted, every window at 0', () => {
    const d = summarizeNsPing(UNREACHABLE, '10.253.7.3', [{ name: 'step', from: 1, to: 2 }]);
    expect(d).toMatchObject({ sent: 0, ok: 0, lost: 0 });
    expect(d.lossesByWindow).toEqual({ outside: 0, step: 0 });
  });
});

/** A stand-in for ping: iputils-shaped replies every 20 ms; SIGINT ends it, unless told to ignore it. */
const FAKE = `
const [ip, mode] = process.argv.slice(2);
let seq = 1;
process.on('SIGINT', () => {
  if (mode === 'ignore-int') return;
  process.stdout.write('\\n--- ' + ip + ' ping statistics ---\\n', () => process.exit(0));
});
setInterval(() => {
  const t = (Date.now() / 1000).toFixed(6);
  process.stdout.write('[' + t + '] 64 bytes from ' + ip + ': icmp_seq=' + seq++ + ' ttl=64 time=0.050 ms\\n');
}, 20);
`;

describe('NsPinger', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ns-ping-'));
  const script = join(dir, 'fake-ping.mjs');
  writeFileSync(script, FAKE);
  const netns = join(dir, 'netns-file'); // start() needs the namespace file to exist
  writeFileSync(netns, '');
  const fake = (mode = 'normal'): NsPingOptions => ({
    argv: (_ns, ip) => [process.execPath, script, ip, mode],
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const counting = (p: NsPinger): Promise<true> =>
    waitFor('replies from every target', () => p.directions().every((d) => d.ok >= 3), {
      timeoutMs: 20_000,
      intervalMs: 20,
    });

  it('one pinger per target; SIGINT ends them, none is left', async () => {
    const p = NsPinger.start(netns, ['10.0.0.1', '10.0.0.2'], fake());
    try {
      await counting(p);
      await p.waitReplyAfter(Date.now() / 1000, 20_000);
      expect(p.directions().map((d) => d.peer)).toEqual(['10.0.0.1', '10.0.0.2']);
      expect(p.problems()).toEqual([]);
    } finally {
      const s = await p.stop();
      expect(s.left).toEqual([]);
      expect(s.exits.map((e) => [e.ip, e.code, e.signal])).toEqual([
        ['10.0.0.1', 0, null],
        ['10.0.0.2', 0, null],
      ]);
      expect(p.text('10.0.0.2')).toContain('--- 10.0.0.2 ping statistics ---');
      expect(await p.stop()).toBe(s); // idempotent
    }
  }, 30_000);

  it('a pinger that ignores SIGINT is killed after the grace time', async () => {
    const p = NsPinger.start(netns, ['10.0.0.3'], fake('ignore-int'));
    await counting(p);
    const s = await p.stop(300);
    expect(s.exits[0]).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(s.left).toEqual([]);
    for (const pid of p.pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 30_000);

  it('a pinger that ended by itself is a problem, named with its stderr, and fails the wait', async () => {
    const p = NsPinger.start(netns, ['10.0.0.4'], {
      argv: () => ['sh', '-c', 'echo "ping: connect: Network is unreachable" >&2; exit 2'],
    });
    await waitFor('the pinger to end', () => p.problems().length > 0, { timeoutMs: 20_000, intervalMs: 20 });
    expect(p.problems()).toEqual([
      `pinger of 10.0.0.4 from ${netns} ended (code 2, signal null): ping: connect: Network is unreachable`,
    ]);
    await expect(p.waitReplyAfter(0, 1000)).rejects.toThrow('Network is unreachable');
    expect((await p.stop()).left).toEqual([]);
  }, 30_000);

  it('the command: nsenter into the namespace file, iputils ping stamped (-D), a line per unanswered probe (-O), no deadline', () => {
    // `-w` would end ping at the first ICMP error (Destination Host Unreachable
    // before a guest has its address: seen in the libvirt network test).
    expect(nsPingArgv('/run/netns/x', '10.0.0.1', 0.2)).toEqual([
      'nsenter',
      '--net=/run/netns/x',
      '--',
      'ping',
      '-D',
      '-O',
      '-n',
      '-i',
      '0.2',
      '10.0.0.1',
    ]);
  });

  it('refuses a missing namespace file and an address that is not IPv4', () => {
    expect(() => NsPinger.start(join(dir, 'nope'), ['10.0.0.1'])).toThrow(
      `ns-ping: no network namespace file ${join(dir, 'nope')}`,
    );
    expect(() => NsPinger.start(netns, ['10.0.0.1; reboot'])).toThrow("target '10.0.0.1; reboot' is not");
    expect(() => NsPinger.start(netns, ['10.0.0.256'])).toThrow("target '10.0.0.256' is not");
    expect(() => NsPinger.start(netns, [])).toThrow('no address to ping');
  });

  /** Real iputils ping in this process's own namespace, to 127.0.0.1 only (root, with ping installed). */
  const REAL = process.getuid?.() === 0 && hasPing();
  it.runIf(REAL)(
    'the real command: nsenter + iputils ping on loopback, counted, stopped, no ping left',
    async () => {
      const p = NsPinger.start(`/proc/${process.pid}/ns/net`, ['127.0.0.1'], { intervalS: 0.05 });
      try {
        await counting(p);
      } finally {
        const s = await p.stop();
        expect(s.left).toEqual([]);
        expect(s.exits[0]).toMatchObject({ code: 0, signal: null });
      }
      expect(p.directions()[0]).toMatchObject({ peer: '127.0.0.1', lost: 0, missing: 0 });
      expect(p.text('127.0.0.1')).toMatch(/packets transmitted/);
      // No `ping -D -O ... 127.0.0.1` anywhere (nsenter execs ping in place: the pid is ping's).
      expect(pingProcesses(['127.0.0.1'])).toEqual([]);
    },
    30_000,
  );
});

function hasPing(): boolean {
  try {
    return /iputils/.test(execFileSync('ping', ['-V'], { encoding: 'utf8' }));
  } catch {
    return false;
  }
}
