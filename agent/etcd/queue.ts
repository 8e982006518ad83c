/**
 * The slot queue's pure part (slots.ts does the I/O). Each waiter has one key
 * under `<prefix>queue/`, bound to its lease; the keys are ordered by their
 * create revision, which etcd gives out once and in increasing order. A
 * waiter's rank is the number of live keys created before its own: a key
 * created later never counts, so a rank never rises, and a waiter is
 * admitted (holds a slot) once its rank is below N. Every node that believes
 * it holds had rank < N when it looked and still has, so all of them are
 * among the N oldest live keys: never more than N at once.
 *
 * Only the waiters near the front watch the queue for deletes (the window:
 * rank below N + 2H, H = the hand-over window); a waiter further back
 * follows one key H places ahead of it, and looks again when that key
 * announces it is near the front (rank below N + H) or goes away.
 */
import { SpcdError } from '../errors.js';

/** How many waiters past the N holders keep a watch on the whole queue: H, at least 2. */
export function windowOf(n: number): number {
  return Math.max(2, n);
}

/** How many keys ahead one listing asks for: N + 2H (a waiter with fewer ahead joins the window). */
export function listLimit(n: number): number {
  return n + 2 * windowOf(n);
}

/** The value of a queue key: who waits, and whether it has announced it is near the front. */
export interface QueueEntry {
  readonly node: string;
  readonly near: boolean;
}

export function encodeEntry(e: QueueEntry): string {
  return JSON.stringify(e.near ? { node: e.node, near: true } : { node: e.node });
}

/** A queue key's value as an entry; anything else (written by hand) counts as a waiter named by the text. */
export function decodeEntry(text: string): QueueEntry {
  try {
    const v = JSON.parse(text) as unknown;
    if (v && typeof v === 'object' && typeof (v as { node?: unknown }).node === 'string')
      return { node: (v as { node: string }).node, near: (v as { near?: unknown }).near === true };
  } catch {
    /* not JSON */
  }
  return { node: text, near: false };
}

/** One key of a listing of the keys ahead (sorted by create revision, newest first). */
export interface AheadKey {
  readonly key: string;
  readonly value: string;
}

export type Placement =
  /** Fewer than N live keys ahead: this node holds a slot. */
  | { readonly kind: 'admitted' }
  /** Every key ahead is listed: watch the queue's deletes and count them down. */
  | { readonly kind: 'window'; readonly ahead: ReadonlySet<string> }
  /** Many keys ahead: follow the one H places ahead until it is near or gone. */
  | { readonly kind: 'follow'; readonly key: string };

/**
 * Where a waiter stands, from one listing of the keys created before its own:
 * newest first, at most listLimit(n) of them, `more` when there were more.
 * A listing that says more follow but holds fewer than H keys is impossible
 * (etcd returns up to the limit asked): INTERNAL, with the counts.
 */
export function place(n: number, newestFirst: readonly AheadKey[], more: boolean): Placement {
  if (!more && newestFirst.length < n) return { kind: 'admitted' };
  const h = windowOf(n);
  if (!more) return { kind: 'window', ahead: new Set(newestFirst.map((k) => k.key)) };
  const followed = newestFirst[h - 1];
  if (!followed)
    throw new SpcdError(
      'INTERNAL',
      `etcd slot queue: a listing of the keys ahead said more follow but returned only ${newestFirst.length} ` +
        `(asked for up to ${listLimit(n)}, N = ${n}; following needs at least ${h})`,
      { n, listed: newestFirst.length, more, limit: listLimit(n), needed: h },
    );
  return { kind: 'follow', key: followed.key };
}

/**
 * The quickest swap spcd expects of a node (a container stopped and started
 * through the engine takes longer): it paces a far waiter's first look.
 */
export const MIN_SWAP_MS = 50;

/**
 * How long a waiter that joined with `ahead` keys ahead waits before its
 * first look (0: at once). The front moves at most N places per swap and no
 * swap is quicker than MIN_SWAP_MS, so a waiter cannot be within the window
 * sooner than (ahead - N - 2H) x MIN_SWAP_MS / N; an unknown count looks at
 * once, and no wait exceeds a minute.
 */
export function firstLookMs(n: number, ahead: number, perPlaceMs: number = MIN_SWAP_MS / n): number {
  if (!Number.isFinite(ahead)) return 0;
  return Math.min(60_000, Math.max(0, Math.round((ahead - listLimit(n)) * perPlaceMs)));
}

/** Within the window: whether this waiter, with `ahead` keys before it, announces it is near (rank < N + H). */
export function isNear(n: number, ahead: number): boolean {
  return ahead < n + windowOf(n);
}
