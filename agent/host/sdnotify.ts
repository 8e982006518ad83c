/**
 * A tiny sd_notify client. Node has no unix datagram sockets, so each message
 * goes through `systemd-notify`, spawned as a direct child of spcd: as root it
 * sends with spcd's PID in its credentials, and it waits (barrier) until PID 1
 * has taken the message, so attribution to the unit is not racy. The unit
 * sets NotifyAccess=all (docs/decisions/0005-sd-notify.md).
 *
 * watchdog() must be called from the reconcile loop's heartbeat, never from a
 * bare timer: a hung loop must stop the keep-alive so systemd restarts spcd.
 */
import { execFile } from 'node:child_process';
import type { Logger } from '../log.js';

export interface SdNotifyOptions {
  /** The helper binary; default `systemd-notify` from PATH. */
  readonly bin?: string;
  /** Deadline for one send; the helper is killed after it. Default 5 s. */
  readonly timeoutMs?: number;
  /** The PID to speak for; default this process. */
  readonly pid?: number;
  readonly log?: Logger;
}

export class SdNotify {
  private readonly socket: string | undefined;
  private readonly bin: string;
  private readonly timeoutMs: number;
  private readonly pid: number;
  private readonly log: Logger | undefined;
  private chain: Promise<void> = Promise.resolve();
  private watchdogQueued = false;
  /** Sends that failed (helper missing, timed out, refused). */
  failures = 0;

  constructor(
    private readonly env: NodeJS.ProcessEnv = process.env,
    opts: SdNotifyOptions = {},
  ) {
    this.socket = env.NOTIFY_SOCKET || undefined;
    this.bin = opts.bin ?? 'systemd-notify';
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.pid = opts.pid ?? process.pid;
    this.log = opts.log;
  }

  /** True when started by systemd with Type=notify (NOTIFY_SOCKET set). */
  get enabled(): boolean {
    return this.socket !== undefined;
  }

  /** READY=1: the sets are adopted and the API socket listens. */
  ready(status?: string): void {
    this.send(['--ready', ...(status ? [`--status=${status}`] : [])]);
  }

  /** WATCHDOG=1. Coalesced: at most one keep-alive waits in the queue. */
  watchdog(): void {
    if (!this.enabled || this.watchdogQueued) return;
    this.watchdogQueued = true;
    this.send(['WATCHDOG=1'], () => {
      this.watchdogQueued = false;
    });
  }

  /**
   * EXTEND_TIMEOUT_USEC: the current start (or stop) may take `ms` more from
   * now before systemd gives up on it (its Timeout{Start,Stop}Sec= otherwise).
   */
  extendTimeout(ms: number): void {
    this.send([`EXTEND_TIMEOUT_USEC=${Math.round(ms * 1000)}`]);
  }

  /** STOPPING=1: shutdown has begun. */
  stopping(): void {
    this.send(['STOPPING=1']);
  }

  status(text: string): void {
    this.send([`--status=${text}`]);
  }

  /**
   * How often to send WATCHDOG=1: half of WATCHDOG_USEC, as sd_watchdog_enabled(3)
   * advises; undefined when no watchdog is asked for this process.
   */
  watchdogIntervalMs(): number | undefined {
    const usec = Number(this.env.WATCHDOG_USEC);
    if (!Number.isFinite(usec) || usec <= 0) return undefined;
    const forPid = this.env.WATCHDOG_PID;
    if (forPid !== undefined && forPid !== '' && Number(forPid) !== this.pid) return undefined;
    return Math.max(1, Math.floor(usec / 1000 / 2));
  }

  /** Resolves when every queued message was handed over (or failed). */
  flush(): Promise<void> {
    return this.chain;
  }

  private send(args: string[], onSent?: () => void): void {
    if (!this.enabled) return;
    // --pid: speak for spcd (also sends MAINPID=, which is spcd anyway).
    const argv = [`--pid=${this.pid}`, ...args];
    this.chain = this.chain.then(
      () =>
        new Promise<void>((resolve) => {
          onSent?.();
          execFile(
            this.bin,
            argv,
            {
              env: { ...this.env, NOTIFY_SOCKET: this.socket },
              timeout: this.timeoutMs,
              killSignal: 'SIGKILL',
            },
            (err, _stdout, stderr) => {
              if (err) {
                this.failures++;
                this.log?.warn({ args, err: err.message, stderr: String(stderr).trim() }, 'sd_notify failed');
              }
              resolve();
            },
          );
        }),
    );
  }
}
