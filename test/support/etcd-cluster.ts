/**
 * A real etcd cluster (Debian's etcd-server, scripts/ensure-etcd.sh) of
 * `size` members on loopback ports the OS picked free, each with its own data
 * directory under one tmp directory, started with --initial-cluster. Members
 * can be SIGKILLed and started again (same data, same ports). Heartbeat and
 * election timeouts are short (100 ms / 1 s) so a lost leader is replaced in
 * about a second.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './wait.js';
import { freePort } from './ports.js';

export { freePort };

interface Member {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  proc: ChildProcess | undefined;
  exited: Promise<void> | undefined;
}

/** Whether the etcd binary is there (scripts/ensure-etcd.sh installs it). */
export function haveEtcd(): boolean {
  return spawnSync('etcd', ['--version'], { stdio: 'ignore' }).status === 0;
}

export class EtcdCluster {
  private readonly members: Member[] = [];
  private readonly root: string;
  private readonly token = `spcd-test-${randomBytes(4).toString('hex')}`;

  private constructor(root: string) {
    this.root = root;
  }

  /** Starts `size` members and waits until the cluster has a leader and answers. */
  static async start(size = 3, opts: { parentDir?: string } = {}): Promise<EtcdCluster> {
    const c = new EtcdCluster(mkdtempSync(join(opts.parentDir ?? tmpdir(), 'spcd-etcd-')));
    for (let i = 0; i < size; i++) {
      const dataDir = join(c.root, `m${i}`);
      mkdirSync(dataDir);
      c.members.push({
        name: `m${i}`,
        clientPort: await freePort(),
        peerPort: await freePort(),
        dataDir: join(dataDir, 'data'),
        logFile: join(dataDir, 'etcd.log'),
        proc: undefined,
        exited: undefined,
      });
    }
    for (let i = 0; i < size; i++) c.spawn(i);
    await c.waitHealthy();
    return c;
  }

  get size(): number {
    return this.members.length;
  }

  endpoint(i: number): string {
    return `http://127.0.0.1:${this.members[i]!.clientPort}`;
  }

  endpoints(): string[] {
    return this.members.map((_, i) => this.endpoint(i));
  }

  running(i: number): boolean {
    return this.members[i]!.proc !== undefined;
  }

  private spawn(i: number): void {
    const m = this.members[i]!;
    const initial = this.members.map((p) => `${p.name}=http://127.0.0.1:${p.peerPort}`).join(',');
    const log = openSync(m.logFile, 'a');
    const proc = spawn(
      'etcd',
      [
        '--name',
        m.name,
        '--data-dir',
        m.dataDir,
        '--listen-client-urls',
        this.endpoint(i),
        '--advertise-client-urls',
        this.endpoint(i),
        '--listen-peer-urls',
        `http://127.0.0.1:${m.peerPort}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${m.peerPort}`,
        '--initial-cluster',
        initial,
        '--initial-cluster-token',
        this.token,
        '--initial-cluster-state',
        'new',
        '--heartbeat-interval',
        '100',
        '--election-timeout',
        '1000',
        '--logger',
        'zap',
        '--log-outputs',
        'stderr',
      ],
      { stdio: ['ignore', log, log] },
    );
    closeSync(log);
    m.proc = proc;
    m.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
  }

  /** SIGKILL of one member; resolves once it is gone. */
  async kill(i: number): Promise<void> {
    const m = this.members[i]!;
    if (!m.proc) return;
    m.proc.kill('SIGKILL');
    await m.exited;
    m.proc = undefined;
  }

  /** Starts a killed member again, with its data. */
  restart(i: number): void {
    if (!this.members[i]!.proc) this.spawn(i);
  }

  /** The member's own view: its id, the leader's id, whether it answers (linearizably: needs quorum). */
  private async status(i: number): Promise<{ member: string; leader: string } | undefined> {
    try {
      const res = await fetch(`${this.endpoint(i)}/v3/maintenance/status`, {
        method: 'POST',
        body: '{}',
        signal: AbortSignal.timeout(2_000),
      });
      if (!res.ok) return undefined;
      const v = (await res.json()) as { header?: { member_id?: string }; leader?: string };
      return v.header?.member_id && v.leader && v.leader !== '0'
        ? { member: v.header.member_id, leader: v.leader }
        : undefined;
    } catch {
      return undefined;
    }
  }

  /** Whether a member can serve a quorum read (GET /health is true only with a leader). */
  private async healthy(i: number): Promise<boolean> {
    try {
      const res = await fetch(`${this.endpoint(i)}/health`, { signal: AbortSignal.timeout(3_000) });
      return res.ok && ((await res.json()) as { health?: string }).health === 'true';
    } catch {
      return false;
    }
  }

  /** Every running member has a leader and answers. */
  async waitHealthy(timeoutMs = 60_000): Promise<void> {
    await waitFor(
      'every running etcd member healthy',
      async () => {
        const up = this.members.map((_, i) => i).filter((i) => this.running(i));
        return (await Promise.all(up.map((i) => this.healthy(i)))).every(Boolean);
      },
      { timeoutMs, intervalMs: 200 },
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${this.logs()}`);
    });
  }

  /** The index of the current leader. */
  async leader(): Promise<number> {
    return waitFor(
      'an etcd leader',
      async () => {
        for (let i = 0; i < this.size; i++) {
          if (!this.running(i)) continue;
          const s = await this.status(i);
          if (!s) continue;
          for (let j = 0; j < this.size; j++) {
            if (!this.running(j)) continue;
            const t = j === i ? s : await this.status(j);
            if (t && t.member === s.leader) return j + 1; // 1-based: 0 is falsy for waitFor
          }
        }
        return undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    ).then((v) => v - 1);
  }

  /**
   * Prometheus metrics of every running member, summed by metric name and
   * grpc_type (e.g. `grpc_server_handled_total/unary`), and by name, type and
   * method (`grpc_server_handled_total/unary/Txn`).
   */
  async metrics(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (let i = 0; i < this.size; i++) {
      if (!this.running(i)) continue;
      const text = await (
        await fetch(`${this.endpoint(i)}/metrics`, { signal: AbortSignal.timeout(5_000) })
      ).text();
      for (const line of text.split('\n')) {
        const m = /^(grpc_server_[a-z_]+)\{([^}]*)\} ([0-9.e+]+)$/.exec(line);
        if (!m) continue;
        const type = /grpc_type="([a-z_]+)"/.exec(m[2]!)?.[1] ?? '';
        const method = /grpc_method="([A-Za-z]+)"/.exec(m[2]!)?.[1] ?? '';
        for (const k of [`${m[1]}/${type}`, `${m[1]}/${type}/${method}`])
          out.set(k, (out.get(k) ?? 0) + Number(m[3]));
      }
    }
    return out;
  }

  /** CPU seconds (user + system) each running member has used so far, from /proc (0 where unreadable). */
  cpuSeconds(): number[] {
    const tick = 100; // USER_HZ on Linux
    return this.members.map((m) => {
      try {
        const stat = readFileSync(`/proc/${m.proc?.pid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return (Number(f[11]) + Number(f[12])) / tick; // utime, stime
      } catch {
        return 0;
      }
    });
  }

  /** The tail of each member's log (for a failure message). */
  logs(lines = 8): string {
    return this.members
      .map((m) => {
        let text = '';
        try {
          text = readFileSync(m.logFile, 'utf8');
        } catch {
          /* not started */
        }
        return `--- ${m.name}\n${text.split('\n').slice(-lines).join('\n')}`;
      })
      .join('\n');
  }

  /** Kills every member and removes the data. */
  async stop(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.kill(i)));
    rmSync(this.root, { recursive: true, force: true });
  }
}
