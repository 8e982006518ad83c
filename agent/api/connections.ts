/**
 * The connection cap, kept so that slow or stuck clients cannot lock an
 * operator out. node's server.maxConnections closes every new connection once
 * the cap is reached, so 64 clients trickling header bytes would make
 * `GET /v1/status` fail until they time out. Instead, at the cap a new
 * connection takes the slot of the oldest connection that is not being
 * served: one still sending its request (headers or body) or idle between
 * requests. A connection whose request is complete (a status answer in
 * flight, an events or logs stream, a running action) is never cut for this.
 * A connection that has not sent a byte yet and is younger than the grace
 * period is not evicted either, so a fresh client always has time to send its
 * request (one that sends a complete request at once is then being served);
 * when every slot is busy or that fresh, the new connection is the one closed.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionGuardOptions {
  readonly maxConnections: number;
  /** A new connection cannot be evicted during this long (ms). */
  readonly graceMs: number;
  readonly now?: () => number;
}

export interface ConnectionCounts {
  readonly open: number;
  /** Connections closed to make room for a new one. */
  readonly evicted: number;
  /** New connections closed because no slot could be freed. */
  readonly refused: number;
}

interface Slot {
  readonly since: number;
  /** Whether any byte arrived yet: the grace period protects only a client that has not spoken yet. */
  heard: boolean;
  /** The request being received or served on this connection, if any. */
  current: IncomingMessage | undefined;
}

/** Installs the cap on `server` (which must not set maxConnections itself); answers live counts. */
export function guardConnections(server: Server, opts: ConnectionGuardOptions): () => ConnectionCounts {
  const now = opts.now ?? Date.now;
  // insertion order is age order: the first evictable entry is the oldest
  const slots = new Map<Socket, Slot>();
  let evicted = 0;
  let refused = 0;

  const evictable = (slot: Slot, at: number): boolean =>
    (slot.heard || at - slot.since >= opts.graceMs) && (slot.current === undefined || !slot.current.complete);

  server.on('connection', (socket: Socket) => {
    const at = now();
    if (slots.size >= opts.maxConnections) {
      let victim: Socket | undefined;
      for (const [s, slot] of slots) {
        if (evictable(slot, at)) {
          victim = s;
          break;
        }
      }
      if (victim === undefined) {
        refused++;
        socket.destroy();
        return;
      }
      slots.delete(victim);
      evicted++;
      victim.destroy();
    }
    const slot: Slot = { since: at, heard: false, current: undefined };
    slots.set(socket, slot);
    // 'data' is only watched for its first chunk (the http parser reads the socket itself)
    socket.prependOnceListener('data', () => {
      slot.heard = true;
    });
    socket.once('close', () => slots.delete(socket));
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const slot = slots.get(req.socket);
    if (!slot) return;
    slot.current = req;
    res.once('close', () => {
      if (slot.current === req) slot.current = undefined;
    });
  });

  return () => ({ open: slots.size, evicted, refused });
}
