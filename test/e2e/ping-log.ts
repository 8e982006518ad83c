/**
 * The e2e guest's ping lines (scripts/libvirt/guest/net), read back from its
 * console log: per peer (one direction, counted in the guest that sent), how
 * many packets were sent and lost, the longest time without a reply, and which
 * named time windows the losses fell in. Pure: text in, numbers out.
 *
 * A guest line is
 *   spcd-ping seq=N peer=IP ok rtt_us=U t_ms=T
 *   spcd-ping seq=N peer=IP lost t_ms=T
 * with T the guest's uptime in ms (estimated for a lost packet). The console
 * watcher of test/e2e/libvirt-vm.sh prefixes every line with the host's epoch
 * seconds ("<epoch> spcd-ping ..."); with that prefix losses are placed in
 * windows of host time: a lost packet between the host stamps of the replies
 * before and after it (by sequence number), or, with no reply after it, by the
 * guest clock mapped to the host's. The guest prints a loss only once the next
 * reply arrived, so a lost line is always followed by a reply in a whole log.
 */

export interface PingLine {
  readonly seq: number;
  readonly peer: string;
  readonly ok: boolean;
  readonly rttUs?: number;
  /** The guest's uptime (ms) at the reply, or the estimated send time of a lost packet. */
  readonly guestMs: number;
  /** The host's epoch seconds when the line reached the console log (stamped logs only). */
  readonly hostS?: number;
}

/** A named stretch of host time (epoch seconds), e.g. one upgrade step. */
export interface PingWindow {
  readonly name: string;
  readonly from: number;
  readonly to: number;
}

export interface PingDirection {
  readonly peer: string;
  /** Sequence numbers the guest used: replies + losses + lines never seen. */
  readonly sent: number;
  readonly ok: number;
  /** Lost packets, including sequence numbers with no line at all (see missing). */
  readonly lost: number;
  /** Sequence numbers skipped on the console (a line garbled or dropped): counted as lost. */
  readonly missing: number;
  /** Times the sequence started again from a lower number (the guest's pinger restarted). */
  readonly restarts: number;
  /** The longest guest time between two consecutive replies (ms). */
  readonly maxGapMs: number;
  /** Guest ms of the reply that ended the longest gap. */
  readonly maxGapEndMs: number;
  readonly lostSeqs: readonly number[];
  /** Host epoch seconds of each loss (stamped logs only), in the order of lostSeqs: see placed in summarizeLines. */
  readonly lostAtS: readonly number[];
  /** Losses per window name, plus `outside` for losses in no window. */
  readonly lossesByWindow: Readonly<Record<string, number>>;
  /** host epoch s = guest ms / 1000 + offsetS (stamped logs only). */
  readonly offsetS?: number;
}

/** Not anchored: a counter line the console interleaved may run into it. */
const LINE = /spcd-ping seq=(\d+) peer=(\S+) (?:ok rtt_us=(\d+)|(lost)) t_ms=(\d+)/;
const STAMP = /^(\d+(?:\.\d+)?) /;

/** Every ping line of a console log (raw or host-stamped); other lines are skipped. */
export function parsePingLines(text: string): PingLine[] {
  const out: PingLine[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r/g, '');
    const m = LINE.exec(line);
    if (!m) continue;
    const stamp = STAMP.exec(line);
    out.push({
      seq: Number(m[1]),
      peer: m[2] ?? '',
      ok: m[4] === undefined,
      ...(m[3] !== undefined ? { rttUs: Number(m[3]) } : {}),
      guestMs: Number(m[5]),
      ...(stamp ? { hostS: Number(stamp[1]) } : {}),
    });
  }
  return out;
}

/**
 * The host-minus-guest clock offset (s): the smallest (host stamp - guest time)
 * over the replies, i.e. that of the line that reached the log fastest.
 */
function clockOffset(lines: readonly PingLine[]): number | undefined {
  let best: number | undefined;
  for (const l of lines) {
    if (!l.ok || l.hostS === undefined) continue;
    const d = l.hostS - l.guestMs / 1000;
    if (best === undefined || d < best) best = d;
  }
  return best;
}

/**
 * One peer's lines in the order they were printed, counted: the shared model
 * of every pinger (the guest's console here, iputils' ping in a namespace in
 * test/e2e/ns-ping.ts). Sent runs from the first line to the last of each
 * sequence run; a number skipped is `missing` and lost; a loss is placed in
 * host time between the replies around it (by sequence number), else by
 * guestMs mapped to host time.
 */
export function summarizeLines(
  peer: string,
  lines: readonly PingLine[],
  windows: readonly PingWindow[],
): PingDirection {
  checkWindows(windows);
  const offsetS = clockOffset(lines);
  if (windows.length > 0 && offsetS === undefined)
    throw new Error(
      `ping log of peer ${peer}: time windows need host-stamped lines ("<epoch> spcd-ping ..."), and none has a stamp`,
    );
  let sent = 0;
  let ok = 0;
  let missing = 0;
  let restarts = 0;
  let maxGapMs = 0;
  let maxGapEndMs = 0;
  let first = -1;
  let prev = -1;
  let lastOkMs: number | undefined;
  const lostSeqs: number[] = [];
  const lostAtS: number[] = [];
  const lossesByWindow: Record<string, number> = { outside: 0 };
  for (const w of windows) lossesByWindow[w.name] = 0;
  const close = (): void => {
    if (first >= 0) sent += prev - first + 1;
  };
  /** Host seconds of a loss: between the stamps of the replies around it, else by the guest clock. */
  const placed = lines.map((l, i): number | undefined => {
    if (l.ok) return undefined;
    let a = i - 1;
    while (a >= 0 && !(lines[a]!.ok && lines[a]!.seq < l.seq)) a -= 1;
    let b = i + 1;
    while (b < lines.length && !(lines[b]!.ok && lines[b]!.seq > l.seq)) b += 1;
    const before = lines[a];
    const after = lines[b];
    if (before?.hostS !== undefined && after?.hostS !== undefined && before.seq < l.seq && after.seq > l.seq)
      return before.hostS + ((l.seq - before.seq) / (after.seq - before.seq)) * (after.hostS - before.hostS);
    return offsetS === undefined ? undefined : l.guestMs / 1000 + offsetS;
  });
  for (const [i, l] of lines.entries()) {
    if (l.seq <= prev) {
      if (l.seq === prev) continue; // the same line twice (a console echo)
      close();
      restarts += 1;
      first = -1;
      prev = -1;
      lastOkMs = undefined;
    }
    if (first < 0) first = l.seq;
    else missing += l.seq - prev - 1;
    prev = l.seq;
    if (l.ok) {
      ok += 1;
      if (lastOkMs !== undefined && l.guestMs - lastOkMs > maxGapMs) {
        maxGapMs = l.guestMs - lastOkMs;
        maxGapEndMs = l.guestMs;
      }
      lastOkMs = l.guestMs;
      continue;
    }
    lostSeqs.push(l.seq);
    const at = placed[i];
    if (at === undefined) continue;
    lostAtS.push(at);
    const w = windows.find((x) => at >= x.from && at <= x.to);
    lossesByWindow[w ? w.name : 'outside'] = (lossesByWindow[w ? w.name : 'outside'] ?? 0) + 1;
  }
  close();
  return {
    peer,
    sent,
    ok,
    lost: lostSeqs.length + missing,
    missing,
    restarts,
    maxGapMs,
    maxGapEndMs,
    lostSeqs,
    lostAtS,
    lossesByWindow,
    ...(offsetS !== undefined ? { offsetS } : {}),
  };
}

function checkWindows(windows: readonly PingWindow[]): void {
  for (const w of windows)
    if (!(w.from <= w.to)) throw new Error(`ping window ${w.name}: from ${w.from} is after to ${w.to}`);
}

/** One summary per peer the log pinged, in the order the peers first appear. */
export function summarizePing(text: string, windows: readonly PingWindow[] = []): PingDirection[] {
  checkWindows(windows);
  const byPeer = new Map<string, PingLine[]>();
  for (const l of parsePingLines(text)) {
    const list = byPeer.get(l.peer) ?? [];
    list.push(l);
    byPeer.set(l.peer, list);
  }
  return [...byPeer].map(([peer, lines]) => summarizeLines(peer, lines, windows));
}

/** `ping from=NAME peer=IP sent=N lost=L max_gap_ms=G losses=window:n,...` */
export function formatPing(from: string, d: PingDirection): string {
  const losses = Object.entries(d.lossesByWindow)
    .filter(([, n]) => n > 0)
    .map(([w, n]) => `${w}:${n}`)
    .join(',');
  return (
    `ping from=${from} peer=${d.peer} sent=${d.sent} ok=${d.ok} lost=${d.lost} missing=${d.missing} ` +
    `restarts=${d.restarts} max_gap_ms=${d.maxGapMs} losses=${losses || 'none'}`
  );
}
