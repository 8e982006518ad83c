/**
 * The memory all open streams (logs and events) may hold in their send
 * buffers together. Each stream has its own cap; without a shared one, 64
 * clients that never read could make spcd hold 64 times that (about 1 GiB
 * for logs). One budget per API handler (no singleton).
 */
import type { ServerResponse } from 'node:http';
import { SpcdError } from '../errors.js';

function mib(bytes: number): string {
  return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`;
}

export class StreamBudget {
  private readonly open = new Set<ServerResponse>();

  constructor(readonly totalBytes: number) {}

  /** Bytes the open streams hold now, not yet taken by their clients. */
  held(): number {
    let sum = 0;
    for (const res of this.open) sum += res.writableLength;
    return sum;
  }

  /**
   * Admits a new stream that may grow to `streamCap` bytes, or throws
   * STREAM_BUDGET_FULL (503) when the open streams hold too much for it.
   * The returned function leaves the budget (call it when the stream ends).
   */
  admit(res: ServerResponse, streamCap: number): () => void {
    const held = this.held();
    if (held + streamCap > this.totalBytes) {
      throw new SpcdError(
        'STREAM_BUDGET_FULL',
        `the open log and event streams hold ${mib(held)} their clients have not read; a new stream could take ${mib(streamCap)} more, over the ${mib(this.totalBytes)} all streams may hold: retry once slow clients read or close`,
        { heldBytes: held, totalBytes: this.totalBytes },
      );
    }
    this.open.add(res);
    return () => this.open.delete(res);
  }

  /** Whether the open streams together hold more than the budget (the stream writing then is dropped). */
  over(): boolean {
    return this.held() > this.totalBytes;
  }
}
