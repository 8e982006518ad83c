/**
 * The pinger of the e2e guest (scripts/libvirt/guest/net, function `pinger`),
 * run by the same busybox the guest carries, with a fake `ping` that prints
 * busybox ping's reply lines: every sequence number gets one line, ok or
 * lost, a duplicate is ignored, and the lines are what test/e2e/ping-log.ts counts.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { summarizePing } from '../e2e/ping-log.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const BUSYBOX = '/bin/busybox';

/** The pinger function of guest/net, exactly as shipped. */
function pingerSource(): string {
  const net = readFileSync(join(REPO, 'scripts/libvirt/guest/net'), 'utf8');
  const start = net.indexOf('pinger() {');
  const end = net.indexOf('\n}\n', start);
  if (start < 0 || end < 0) throw new Error('scripts/libvirt/guest/net: no pinger() function');
  return net.slice(start, end + 3);
}

/** The pinger with iputils' ping at `$IPING` (a stand-in printing iputils' reply lines). */
function runIputilsPinger(replies: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-iping-'));
  try {
    const iping = join(dir, 'iping');
    const lines = ['PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.', ...replies];
    writeFileSync(iping, `#!${BUSYBOX} sh\n${lines.map((l) => `echo '${l}'`).join('\n')}\n`);
    chmodSync(iping, 0o755);
    const script = [
      'ms=200',
      'ping() { return 0; }',
      `IPING=${iping}`,
      pingerSource(),
      'pinger 10.0.0.2',
    ].join('\n');
    return execFileSync(BUSYBOX, ['sh', '-c', script], { encoding: 'utf8', timeout: 10_000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function runPinger(replySeqs: string[]): string {
  const replies = replySeqs.map((s) => `  echo '64 bytes from 10.0.0.2: ${s}'`);
  const script = [
    'ms=200',
    // -c 1: the first-answer probe; otherwise the continuous ping (its header line included).
    'ping() {',
    '  if [ "$1" = -c ]; then return 0; fi',
    "  echo 'PING 10.0.0.2 (10.0.0.2): 56 data bytes'",
    ...replies,
    '}',
    pingerSource(),
    'pinger 10.0.0.2',
  ].join('\n');
  return execFileSync(BUSYBOX, ['sh', '-c', script], { encoding: 'utf8', timeout: 10_000 });
}

describe.runIf(existsSync(BUSYBOX))('the guest pinger (busybox sh)', () => {
  it('prints one line per sequence number: replies ok with their rtt, gaps lost, duplicates skipped', () => {
    const out = runPinger([
      'seq=0 ttl=64 time=0.308 ms',
      'seq=1 ttl=64 time=12.045 ms',
      'seq=1 ttl=64 time=12.100 ms (DUP!)',
      'seq=4 ttl=64 time=1002.5 ms', // busybox prints three decimals; fewer are padded
      'seq=5 ttl=64 time=7 ms',
    ]);
    const lines = out.trim().split('\n');
    expect(lines[0]).toBe('spcd-ping peer=10.0.0.2 start interval_ms=200');
    expect(lines.slice(1).map((l) => l.replace(/ t_ms=\d+$/, ''))).toEqual([
      'spcd-ping seq=0 peer=10.0.0.2 ok rtt_us=308',
      'spcd-ping seq=1 peer=10.0.0.2 ok rtt_us=12045',
      'spcd-ping seq=2 peer=10.0.0.2 lost',
      'spcd-ping seq=3 peer=10.0.0.2 lost',
      'spcd-ping seq=4 peer=10.0.0.2 ok rtt_us=1002500',
      'spcd-ping seq=5 peer=10.0.0.2 ok rtt_us=7000',
    ]);
    for (const l of lines.slice(1)) expect(l).toMatch(/ t_ms=\d+$/);
    expect(summarizePing(out)).toMatchObject([{ peer: '10.0.0.2', sent: 6, ok: 4, lost: 2, missing: 0 }]);
  });

  it("reads iputils' lines when the guest carries it, counting from its first sequence number, 1", () => {
    const out = runIputilsPinger([
      '64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.412 ms',
      '64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=3.05 ms',
      '64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=3.10 ms (DUP!)',
      '64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=1200 ms',
    ]);
    const lines = out.trim().split('\n');
    expect(lines.slice(1).map((l) => l.replace(/ t_ms=\d+$/, ''))).toEqual([
      'spcd-ping seq=1 peer=10.0.0.2 ok rtt_us=412',
      'spcd-ping seq=2 peer=10.0.0.2 ok rtt_us=3050',
      'spcd-ping seq=3 peer=10.0.0.2 lost',
      'spcd-ping seq=4 peer=10.0.0.2 ok rtt_us=1200000',
    ]);
    expect(summarizePing(out)).toMatchObject([{ peer: '10.0.0.2', sent: 4, ok: 3, lost: 1, missing: 0 }]);
  });
});
