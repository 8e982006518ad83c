/**
 * The VMs' pings as the host sees them (docs/explanation/adoption-proof.md):
 * tcpdump on every device of the host (Linux cooked v2, so each packet keeps
 * the index of the device it was seen on), ICMP between the two VMs'
 * addresses. A request or reply that left its sender's tap and went out on
 * the other VM's tap was carried by the host's whole path (bridges,
 * firewall, Open vSwitch); one seen on the way that never went out there was
 * lost on the host. Set against the guests' own counts, this places a loss:
 * on the host's path, or between a tap and the guest's ping (qemu and a
 * guest starved of CPU under TCG).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { PingWindow } from './ping-log.js';

/** One ICMP echo between the VMs, as the capture saw it. */
interface Echo {
  readonly key: string;
  readonly dst: string;
  readonly first: number;
  /** Device indexes it went out on. */
  readonly out: Set<number>;
}

export interface WireTally {
  /** Echo requests and replies between the VMs seen on the host. */
  readonly seen: number;
  /** Of those, the ones that never went out on the destination VM's tap. */
  readonly lost: number;
  /** Lost ones by the step window their first sighting falls in (`outside` between steps). */
  readonly lostByWindow: Readonly<Record<string, number>>;
}

const run = promisify(execFile);

const ECHO =
  /^(\d+\.\d+) \S+\s+(In|Out|P|M|B)\s+ifindex (\d+) .*?(\d+\.\d+\.\d+\.\d+) > (\d+\.\d+\.\d+\.\d+): ICMP echo (request|reply), id (\d+), seq (\d+)/;

/**
 * Counts, from `tcpdump -r FILE -n -tt -e` lines, the echoes between the VMs
 * that never went out on their destination's tap (`taps`: address → the
 * index of that VM's tap), each placed in the window of its first sighting.
 * Only echoes first seen within the windows count (the pings before the
 * first step and after the last are not the steps').
 */
export function wireTally(
  lines: readonly string[],
  taps: ReadonlyMap<string, number>,
  windows: readonly PingWindow[],
): WireTally {
  const echoes = new Map<string, Echo>();
  for (const l of lines) {
    const m = ECHO.exec(l);
    if (!m) continue;
    const [, t, dir, ifi, src, dst, kind, id, seq] = m as unknown as string[];
    if (!taps.has(src!) || !taps.has(dst!)) continue;
    const key = `${src}>${dst} ${kind} id=${id} seq=${seq}`;
    const e = echoes.get(key) ?? { key, dst: dst!, first: Number(t), out: new Set<number>() };
    echoes.set(key, e);
    if (dir === 'Out') e.out.add(Number(ifi));
  }
  const from = windows[0]?.from ?? Infinity;
  const to = windows.at(-1)?.to ?? -Infinity;
  const lostByWindow: Record<string, number> = {};
  let seen = 0;
  let lost = 0;
  for (const e of echoes.values()) {
    if (e.first < from || e.first > to) continue;
    seen++;
    if (e.out.has(taps.get(e.dst)!)) continue;
    lost++;
    const w = windows.find((x) => e.first >= x.from && e.first <= x.to)?.name ?? 'outside';
    lostByWindow[w] = (lostByWindow[w] ?? 0) + 1;
  }
  return { seen, lost, lostByWindow };
}

/** One line for the test's output. */
export function wireLine(t: WireTally, dropped: number): string {
  const where = Object.entries(t.lostByWindow)
    .map(([w, n]) => `${w}:${n}`)
    .join(',');
  return `wire echoes_seen=${t.seen} lost=${t.lost} capture_dropped=${dropped} losses=${where || 'none'}`;
}

/** A VM's tap on the host, named by Nova's hybrid plug after its port. */
export function tapIndex(portId: string): number {
  return Number(readFileSync(`/sys/class/net/tap${portId.slice(0, 11)}/ifindex`, 'utf8').trim());
}

export class TapCapture {
  private constructor(
    private readonly file: string,
    private readonly child: ChildProcess,
    private readonly stderr: string[],
  ) {}

  /** Starts capturing ICMP between `ips` on every device into `dir`. */
  static async start(dir: string, ips: readonly [string, string]): Promise<TapCapture> {
    await run('bash', [join(import.meta.dirname, '../../scripts/ensure-tcpdump.sh')], {
      timeout: 9 * 60_000,
    });
    const file = join(dir, 'vm-pings.pcap');
    const filter = `icmp and host ${ips[0]} and host ${ips[1]}`;
    const child = spawn('tcpdump', ['-i', 'any', '-y', 'LINUX_SLL2', '-U', '-n', '-w', file, filter], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const stderr: string[] = [];
    child.stderr!.on('data', (b: Buffer) => stderr.push(b.toString()));
    const listening = Date.now() + 30_000;
    while (!stderr.join('').includes('listening on')) {
      if (child.exitCode !== null) throw new Error(`tcpdump ended: ${stderr.join('').trim()}`);
      if (Date.now() > listening) throw new Error(`tcpdump did not start: ${stderr.join('').trim()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return new TapCapture(file, child, stderr);
  }

  /** Ends tcpdump if it still runs (a variant that failed before its count). */
  close(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }

  /** Stops the capture; its lines and how many packets the kernel dropped before tcpdump read them. */
  async stop(): Promise<{ lines: string[]; dropped: number }> {
    if (this.child.exitCode === null) {
      const ended = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGINT');
      await Promise.race([ended, new Promise((r) => setTimeout(r, 10_000))]);
      if (this.child.exitCode === null) this.child.kill('SIGKILL');
    }
    const dropped = Number(/(\d+) packets? dropped by kernel/.exec(this.stderr.join(''))?.[1] ?? 0);
    const out = await run('tcpdump', ['-r', this.file, '-n', '-tt', '-e'], {
      timeout: 120_000,
      maxBuffer: 256 * 1024 * 1024,
    });
    return { lines: out.stdout.split('\n'), dropped };
  }
}
