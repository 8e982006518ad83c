/**
 * The VMs' pings in the OpenStack end-to-end test (issue #15,
 * docs/explanation/openstack-network.md "The ping phase"): both guests get a Neutron port with
 * a fixed address (VM_IPS, outside the DHCP pool so dnsmasq's own port cannot
 * take one) and `spcd.peer=A,B` on their kernel command line; each pings the
 * other every 200 ms and prints one console line per packet
 * (scripts/libvirt/guest/net), which ConsoleWatch stamps with the host's
 * time. Each step of the test is a named window of host time; the report
 * counts every packet per direction (test/e2e/ping-log.ts) and places each
 * loss in the step it fell in. The DHCP agent's qdhcp namespace pings both VMs
 * too (test/e2e/openstack-ns-ping.ts): those directions are counted apart
 * (`ns_lost`, `ns_ping_*`).
 */
import { waitFor } from '../support/wait.js';
import { formatPing, summarizePing, type PingDirection, type PingWindow } from './ping-log.js';

/** The VMs' fixed addresses, in boot order. */
export const VM_IPS = ['10.251.0.11', '10.251.0.12'] as const;
/** Where dnsmasq's own port (and any other port without a fixed address) takes its address. */
export const DHCP_POOL = { start: '10.251.0.100', end: '10.251.0.200' } as const;
/** The guest's kernel command line (Glance's os_command_line) with the peers. */
export const GUEST_CMDLINE = `console=ttyS0 panic=-1 quiet spcd.peer=${VM_IPS.join(',')}`;

/** One guest's stamped ping lines: `from` names it, `peer` is the address it pings. */
export interface PingSource {
  readonly from: string;
  readonly peer: string;
  readonly text: () => string;
}

/** A direction counted elsewhere (the namespace's pinger): who pinged, and its counts. */
export interface CountedDirection {
  readonly from: string;
  readonly d: PingDirection;
}

export interface PingReport {
  readonly directions: readonly CountedDirection[];
  /** Whether the namespace's directions were given (then every line names their losses too). */
  readonly withNs: boolean;
  readonly ns: readonly CountedDirection[];
  readonly nsSent: number;
  readonly nsLost: number;
  readonly sent: number;
  readonly lost: number;
  readonly maxGapMs: number;
  readonly restarts: number;
  /** One line per window: its duration and the losses (both directions) in it; `ns_lost` the namespace's. */
  readonly stepLines: readonly string[];
  /** Losses per window name (both directions), plus `outside`. */
  readonly lossesByWindow: Readonly<Record<string, number>>;
  /** The same for the namespace's directions. */
  readonly nsLossesByWindow: Readonly<Record<string, number>>;
  /** `vm_ping_sent=N vm_ping_lost=L max_ping_gap_ms=G`, then `ns_ping_sent=N ns_ping_lost=L` when ns was given. */
  readonly summary: string;
}

/** The direction of `s` towards its peer, or an error naming the guest. */
function direction(s: PingSource, windows: readonly PingWindow[]): PingDirection {
  const d = summarizePing(s.text(), windows).find((x) => x.peer === s.peer);
  if (!d) throw new Error(`no ping line from ${s.from} to ${s.peer} on its console`);
  return d;
}

/** Losses per window name over `ds`, every window and `outside` present. */
function addLosses(ds: readonly CountedDirection[], windows: readonly PingWindow[]): Record<string, number> {
  const out: Record<string, number> = { outside: 0 };
  for (const w of windows) out[w.name] = 0;
  for (const { d } of ds) for (const [w, n] of Object.entries(d.lossesByWindow)) out[w] = (out[w] ?? 0) + n;
  return out;
}

/**
 * Pure: the stamped lines, the step windows and the namespace's directions
 * (counted with the same windows) in; the counts per direction and per step out.
 */
export function pingReport(
  sources: readonly PingSource[],
  windows: readonly PingWindow[],
  ns?: readonly CountedDirection[],
): PingReport {
  const directions = sources.map((s) => ({ from: s.from, d: direction(s, windows) }));
  const lossesByWindow = addLosses(directions, windows);
  const nsLossesByWindow = addLosses(ns ?? [], windows);
  const nsSent = (ns ?? []).reduce((n, x) => n + x.d.sent, 0);
  const nsLost = (ns ?? []).reduce((n, x) => n + x.d.lost, 0);
  const sent = directions.reduce((n, x) => n + x.d.sent, 0);
  const lost = directions.reduce((n, x) => n + x.d.lost, 0);
  const maxGapMs = Math.max(0, ...directions.map((x) => x.d.maxGapMs));
  const restarts = directions.reduce((n, x) => n + x.d.restarts, 0);
  const nsPart = (w: string): string => (ns ? ` ns_lost=${nsLossesByWindow[w]}` : '');
  const stepLines = windows.map(
    (w) =>
      `ping_step step=${w.name} duration_s=${(w.to - w.from).toFixed(1)} lost=${lossesByWindow[w.name]}${nsPart(w.name)}`,
  );
  return {
    directions,
    withNs: ns !== undefined,
    ns: ns ?? [],
    nsSent,
    nsLost,
    sent,
    lost,
    maxGapMs,
    restarts,
    stepLines,
    lossesByWindow,
    nsLossesByWindow,
    summary:
      `vm_ping_sent=${sent} vm_ping_lost=${lost} max_ping_gap_ms=${maxGapMs}` +
      (ns ? ` ns_ping_sent=${nsSent} ns_ping_lost=${nsLost}` : ''),
  };
}

/** The report's lines: one per direction (formatPing; the namespace's after the guests'), one per step, and the losses outside every step. */
export function reportLines(r: PingReport): string[] {
  return [
    ...[...r.directions, ...r.ns].map((x) => formatPing(x.from, x.d)),
    ...r.stepLines,
    `ping_outside_steps lost=${r.lossesByWindow.outside ?? 0}` +
      (r.withNs ? ` ns_lost=${r.nsLossesByWindow.outside ?? 0}` : ''),
  ];
}

/** Waits until every guest printed a reply from its peer (its pinger started and the watcher stamped it). */
export async function waitPinging(sources: readonly PingSource[], timeoutMs: number): Promise<void> {
  for (const s of sources)
    await waitFor(
      `${s.from} to get a ping reply from ${s.peer}`,
      () => summarizePing(s.text()).some((d) => d.peer === s.peer && d.ok > 0),
      { timeoutMs, intervalMs: 500 },
    );
}

/**
 * Waits until every guest has a reply stamped after `afterS` (epoch s): the
 * guest prints a lost packet only when the next reply came, so every loss
 * before `afterS` is on its console by then. Throws (naming the guest) when a
 * direction stays silent: its packets after its last reply are lost.
 */
export async function waitReplyAfter(
  sources: readonly PingSource[],
  afterS: number,
  timeoutMs: number,
): Promise<void> {
  for (const s of sources)
    await waitFor(
      `${s.from} to get a reply from ${s.peer} after ${afterS.toFixed(1)}`,
      () => {
        const stamps = s
          .text()
          .split('\n')
          .filter((l) => l.includes(` peer=${s.peer} ok `))
          .map((l) => Number(l.split(' ', 1)[0]));
        return stamps.some((t) => t > afterS);
      },
      { timeoutMs, intervalMs: 500 },
    );
}
