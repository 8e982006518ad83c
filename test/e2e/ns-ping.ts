/**
 * Pings the e2e VMs from a network namespace (issue #15: "each direction
 * counted in-guest, and from the DHCP namespace"): one iputils `ping` per
 * target, entered into the namespace with nsenter,
 *
 *   nsenter --net=NETNS -- ping -D -O -n -i 0.2 IP
 *
 * `-D` stamps every line with the host's epoch seconds, `-O` prints a line
 * for a probe still unanswered when the next one goes out, so a pinger writes
 * a line per probe and one whose reader died ends at its next line (SIGPIPE:
 * no pinger outlives the test process). No `-w`: with a deadline iputils ends
 * at the first ICMP error, e.g. `Destination Host Unreachable` while a guest
 * has no address yet. Its output is counted with the guests' model
 * (summarizeLines in test/e2e/ping-log.ts): per target sent / ok / lost /
 * missing / max gap, and the losses per named window of host time.
 *
 * iputils prints (one process per target, so the target is known):
 *   [1795507405.960369] 64 bytes from 10.253.7.2: icmp_seq=2 ttl=64 time=0.058 ms
 *   [1795507406.372253] no answer yet for icmp_seq=3
 *   [1795507388.684388] From 10.253.7.1 icmp_seq=1 Destination Host Unreachable
 * A reply may come after a `no answer yet` line for its number (late, not
 * lost). Counting runs from the first replied number to the last, as in the
 * guest: a number with no reply in between is lost, the probes after the last
 * reply are still in flight and not counted, and a number with no line at all
 * is `missing` (lost). icmp_seq is 16 bits and wraps; numbers are unwrapped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { waitFor } from '../support/wait.js';
import { summarizeLines, type PingDirection, type PingLine, type PingWindow } from './ping-log.js';

const STAMP = String.raw`^\[(\d+(?:\.\d+)?)\] `;
const REPLY = new RegExp(`${STAMP}\\d+ bytes from ([^:\\s]+): icmp_seq=(\\d+) .*?time=([\\d.]+) ms`);
const NO_ANSWER = new RegExp(`${STAMP}no answer yet for icmp_seq=(\\d+)`);
const ERROR = new RegExp(`${STAMP}From \\S+ icmp_seq=(\\d+) `);
const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const WRAP = 65_536;

/** The number nearest to `ref` that is `raw` modulo 2^16. */
function unwrap(raw: number, ref: number): number {
  return raw + WRAP * Math.round((ref - raw) / WRAP);
}

/**
 * One target's output in PingLine form (the guests' model): a line per
 * number from the first reply to the last, in number order; a reply at its
 * first stamp, an unanswered number at its first `no answer yet` or error
 * line. Lines from another address than `peer` are not replies.
 */
export function parseNsPing(text: string, peer: string): PingLine[] {
  const replies = new Map<number, { at: number; rttUs: number }>();
  const unanswered = new Map<number, number>();
  let top: number | undefined;
  const seqOf = (raw: string): number => {
    const s = top === undefined ? Number(raw) : unwrap(Number(raw), top);
    if (top === undefined || s > top) top = s;
    return s;
  };
  for (const line of text.split('\n')) {
    const r = REPLY.exec(line);
    if (r && r[2] === peer) {
      const seq = seqOf(r[3]!);
      if (!replies.has(seq)) replies.set(seq, { at: Number(r[1]), rttUs: Math.round(Number(r[4]) * 1000) });
      continue;
    }
    const n = NO_ANSWER.exec(line) ?? ERROR.exec(line);
    if (n) {
      const seq = seqOf(n[2]!);
      if (!unanswered.has(seq)) unanswered.set(seq, Number(n[1]));
    }
  }
  if (replies.size === 0) return [];
  const seqs = [...replies.keys()];
  const first = Math.min(...seqs);
  const last = Math.max(...seqs);
  const out: PingLine[] = [];
  for (let seq = first; seq <= last; seq++) {
    const ok = replies.get(seq);
    const at = ok?.at ?? unanswered.get(seq);
    if (at === undefined) continue; // no line at all: summarizeLines counts it missing
    out.push({
      seq,
      peer,
      ok: ok !== undefined,
      ...(ok ? { rttUs: ok.rttUs } : {}),
      guestMs: Math.round(at * 1000),
      hostS: at,
    });
  }
  return out;
}

/** One target's counts from its ping output, with the losses per window. */
export function summarizeNsPing(
  text: string,
  peer: string,
  windows: readonly PingWindow[] = [],
): PingDirection {
  const lines = parseNsPing(text, peer);
  if (lines.length > 0) return summarizeLines(peer, lines, windows);
  const empty = summarizeLines(peer, [], []);
  const lossesByWindow: Record<string, number> = { outside: 0 };
  for (const w of windows) lossesByWindow[w.name] = 0;
  return { ...empty, lossesByWindow };
}

export interface NsPingOptions {
  /** Seconds between probes (iputils `-i`); default 0.2. */
  readonly intervalS?: number;
  /** The command for one target (tests); default nsPingArgv. */
  readonly argv?: (netns: string, ip: string, intervalS: number) => string[];
}

/** What stop() found: how each pinger ended, and the pids still alive afterwards (none when clean). */
export interface NsPingStop {
  readonly exits: readonly { ip: string; pid: number; code: number | null; signal: string | null }[];
  readonly left: readonly number[];
}

interface Pinger {
  readonly ip: string;
  readonly child: ChildProcess;
  readonly pid: number;
  out: string;
  err: string;
  closed: Promise<void>;
  ended?: { code: number | null; signal: string | null };
}

/** nsenter + iputils ping, as above. */
export function nsPingArgv(netns: string, ip: string, intervalS: number): string[] {
  return ['nsenter', `--net=${netns}`, '--', 'ping', '-D', '-O', '-n', '-i', String(intervalS), ip];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether `p` settled within `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([
    p.then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
  ]);
  clearTimeout(timer);
  return done;
}

/** Pingers in one namespace, one per target; start() spawns them, stop() ends them all. */
export class NsPinger {
  private stopped: NsPingStop | undefined;

  private constructor(
    readonly netns: string,
    private readonly pingers: readonly Pinger[],
  ) {}

  /** Starts one pinger per address in the namespace file `netns` (e.g. /run/netns/NAME). */
  static start(netns: string, ips: readonly string[], opts: NsPingOptions = {}): NsPinger {
    if (!existsSync(netns)) throw new Error(`ns-ping: no network namespace file ${netns}`);
    if (ips.length === 0) throw new Error(`ns-ping: no address to ping from ${netns}`);
    for (const ip of ips) {
      const m = IPV4.exec(ip);
      if (!m || m.slice(1).some((o) => Number(o) > 255))
        throw new Error(`ns-ping: target '${ip}' is not an IPv4 address`);
    }
    const intervalS = opts.intervalS ?? 0.2;
    const pingers: Pinger[] = [];
    for (const ip of ips) {
      const [cmd, ...args] = (opts.argv ?? nsPingArgv)(netns, ip, intervalS);
      const child = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      if (child.pid === undefined) {
        for (const p of pingers) p.child.kill('SIGKILL');
        throw new Error(`ns-ping: could not start ${cmd} for ${ip}`);
      }
      const p: Pinger = { ip, child, pid: child.pid, out: '', err: '', closed: Promise.resolve() };
      child.stdout.setEncoding('utf8').on('data', (s: string) => (p.out += s));
      child.stderr.setEncoding('utf8').on('data', (s: string) => (p.err += s));
      p.closed = new Promise((resolve) =>
        child.on('close', (code, signal) => {
          p.ended = { code, signal };
          resolve();
        }),
      );
      pingers.push(p);
    }
    return new NsPinger(netns, pingers);
  }

  get pids(): number[] {
    return this.pingers.map((p) => p.pid);
  }

  /** The output of the pinger of `ip` so far. */
  text(ip: string): string {
    const p = this.pingers.find((x) => x.ip === ip);
    if (!p) throw new Error(`ns-ping: ${ip} is not a target from ${this.netns}`);
    return p.out;
  }

  /** Each target's counts so far (the windows place the losses). */
  directions(windows: readonly PingWindow[] = []): PingDirection[] {
    return this.pingers.map((p) => summarizeNsPing(p.out, p.ip, windows));
  }

  /** Pingers that ended before stop(), each with its exit and stderr: a pinger that ended counts nothing more. */
  problems(): string[] {
    return this.pingers
      .filter((p) => p.ended && !this.stopped)
      .map(
        (p) =>
          `pinger of ${p.ip} from ${this.netns} ended (code ${p.ended!.code}, signal ${p.ended!.signal}): ${p.err.trim() || 'no stderr'}`,
      );
  }

  /** Waits until every target has a reply stamped after `afterS` (epoch s): every loss before it is then counted. */
  async waitReplyAfter(afterS: number, timeoutMs: number): Promise<void> {
    for (const p of this.pingers)
      await waitFor(
        `a reply from ${p.ip} in ${this.netns} after ${afterS.toFixed(1)}`,
        () => {
          const bad = this.problems();
          if (bad.length) throw new Error(bad.join('; '));
          return parseNsPing(p.out, p.ip).some((l) => l.ok && (l.hostS ?? 0) > afterS);
        },
        { timeoutMs, intervalMs: 200 },
      ).catch((e: Error) => {
        throw new Error(`${e.message}\n${p.err.trim()}`.trim());
      });
  }

  /**
   * Ends every pinger: SIGINT (ping prints its statistics and exits), SIGKILL
   * to those still there after `graceMs`, then waits (`graceMs` again) for
   * each to close. Idempotent. `left` lists the pids still alive afterwards.
   */
  async stop(graceMs = 5000): Promise<NsPingStop> {
    if (this.stopped) return this.stopped;
    for (const p of this.pingers) if (!p.ended) p.child.kill('SIGINT');
    const all = Promise.all(this.pingers.map((p) => p.closed));
    if (!(await within(all, graceMs))) {
      for (const p of this.pingers) if (!p.ended) p.child.kill('SIGKILL');
      await within(all, graceMs);
    }
    this.stopped = {
      exits: this.pingers.map((p) => ({
        ip: p.ip,
        pid: p.pid,
        code: p.ended?.code ?? null,
        signal: p.ended?.signal ?? null,
      })),
      left: this.pingers.map((p) => p.pid).filter(alive),
    };
    return this.stopped;
  }
}

/**
 * Pids of an iputils ping with this pinger's `-O` to one of `ips`, anywhere on
 * the host (nsenter execs ping in place, so the namespace is not on its
 * command line): none once the pingers stopped.
 */
export function pingProcesses(ips: readonly string[]): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let cmd: string[];
    try {
      cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    if (/(^|\/)ping$/.test(cmd[0] ?? '') && cmd.includes('-O') && ips.some((ip) => cmd.includes(ip)))
      out.push(Number(e));
  }
  return out;
}
