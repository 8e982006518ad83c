/**
 * Following one operation on /v1/events until it succeeds or fails. On a
 * terminal one line is redrawn in place; otherwise each step is a plain line
 * (pull progress only when its status text changes, so logs stay short).
 */
import type { OperationRef } from '../api/types.js';
import type { SpcdEvent } from '../model/events.js';
import { lineSplitter, type ApiClient } from './client.js';
import { CliError, EXIT, type ExitCode } from './exit.js';
import { formatEvent, progressText } from './format.js';

export interface ProgressOut {
  write(text: string): unknown;
  isTTY?: boolean;
  /** Scripts: the ref and each event of the operation as one JSON line, nothing redrawn. */
  json?: boolean;
}

/** What the caller may ask of the follow: `onSucceeded` gets the final event's result (undefined when it has none). */
export interface FollowOptions {
  readonly onSucceeded?: (result: unknown) => void;
}

/**
 * Subscribes first, then starts the operation (so no event can be missed),
 * then prints the events of that operation id until its final phase.
 */
export async function runAndFollow(
  client: ApiClient,
  start: () => Promise<OperationRef>,
  out: ProgressOut,
  err: ProgressOut,
  timeoutMs: number,
  opts: FollowOptions = {},
): Promise<ExitCode> {
  const backlog: SpcdEvent[] = [];
  let ref: OperationRef | null = null;
  type Outcome = { kind: 'finished'; code: ExitCode } | { kind: 'timeout' } | { kind: 'stream-ended' };
  let settle: ((o: Outcome) => void) | null = null;
  const outcome = new Promise<Outcome>((resolve) => (settle = resolve));
  const view = new ProgressView(out);

  const handle = (e: SpcdEvent): void => {
    if (!ref || !('operationId' in e) || e.operationId !== ref.operationId) return;
    view.show(e);
    if (e.type === 'operation' && (e.phase === 'succeeded' || e.phase === 'failed')) {
      view.done();
      if (e.phase === 'succeeded') opts.onSucceeded?.(e.result);
      if (e.phase === 'failed') {
        err.write(
          `operation ${e.operationId} failed${e.error ? `: ${e.error.code}: ${e.error.message}` : ''}\n`,
        );
      }
      settle?.({ kind: 'finished', code: e.phase === 'succeeded' ? EXIT.OK : EXIT.FAILED });
    }
  };
  const stream = await client.stream(
    '/v1/events',
    lineSplitter((line) => {
      if (line.trim() === '') return;
      let e: SpcdEvent | { type: 'heartbeat' };
      try {
        e = JSON.parse(line) as SpcdEvent | { type: 'heartbeat' };
      } catch {
        return;
      }
      if (e.type === 'heartbeat') return;
      if (ref) handle(e);
      else backlog.push(e);
    }),
  );
  try {
    ref = await start();
    view.accepted(ref);
    backlog.splice(0).forEach(handle);
    const timer = setTimeout(() => settle?.({ kind: 'timeout' }), timeoutMs);
    void stream.done.then(() => settle?.({ kind: 'stream-ended' }));
    const o = await outcome;
    clearTimeout(timer);
    if (o.kind === 'finished') return o.code;
    view.done();
    if (o.kind === 'timeout') {
      throw new CliError(
        `operation ${ref.operationId} did not finish in ${timeoutMs / 1000}s (it goes on in spcd)`,
        EXIT.FAILED,
      );
    }
    throw new CliError(
      `the event stream ended before operation ${ref.operationId} finished (spcd restarted?)`,
      EXIT.FAILED,
    );
  } finally {
    stream.close();
  }
}

export class ProgressView {
  private lastPull = '';
  private drawn = false;

  constructor(private readonly out: ProgressOut) {}

  accepted(ref: OperationRef): void {
    if (this.out.json) return void this.out.write(JSON.stringify(ref) + '\n');
    this.line(`operation ${ref.operationId}: ${ref.kind} ${ref.target} accepted`, true);
  }

  show(e: SpcdEvent): void {
    if (this.out.json) return void this.out.write(JSON.stringify(e) + '\n');
    if (this.out.isTTY) {
      this.redraw(this.ttyText(e));
      if (e.type === 'upgrade-step' && e.outcome !== 'begin') this.line(formatEvent(e), true);
      return;
    }
    if (e.type === 'pull-progress') {
      if (e.status === this.lastPull) return;
      this.lastPull = e.status;
    }
    this.line(formatEvent(e), false);
  }

  done(): void {
    if (this.drawn) this.out.write('\n');
    this.drawn = false;
  }

  private ttyText(e: SpcdEvent): string {
    switch (e.type) {
      case 'pull-progress':
        return `pulling ${e.image}: ${e.status}${progressText(e.current, e.total)}`;
      case 'upgrade-step':
        return `${e.container} gen ${e.generation}: ${e.step} ${e.outcome}`;
      case 'operation':
        return `${e.operationId}: ${e.phase}`;
      default:
        return formatEvent(e);
    }
  }

  private redraw(text: string): void {
    const width = 120;
    this.out.write(`\r\x1b[2K${text.length > width ? text.slice(0, width - 1) + '…' : text}`);
    this.drawn = true;
  }

  private line(text: string, keep: boolean): void {
    if (this.out.isTTY && this.drawn) this.out.write('\r\x1b[2K');
    this.out.write(text + '\n');
    if (keep) this.drawn = false;
  }
}
