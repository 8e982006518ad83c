/**
 * The last line of the OpenStack end-to-end test (test/e2e/run-openstack-e2e.sh
 * prints it last and checks its fields): every VM's survival, Nova, the
 * windows of the steps and the pings counted in them.
 */
import type { PingReport } from './openstack-ping.js';
import type { StepResult } from './openstack-steps.js';

/** The engine restart steps' names begin so (test/e2e/openstack-dockerd-steps.ts). */
export const DOCKERD_STEP = 'dockerd-restart';

export interface SummaryInput {
  readonly results: readonly StepResult[];
  /** Steps times VMs: the survivals the run checks. */
  readonly checked: number;
  readonly steps: number;
  readonly managed: number;
  readonly shippedSet: number;
  readonly rabbitOutageRestarts: number | undefined;
  readonly networkOk: number;
  readonly ping: PingReport | undefined;
}

const finite = (xs: readonly number[]): number[] => xs.filter((x) => Number.isFinite(x));
const max = (xs: readonly number[], digits: number): string =>
  xs.length ? Math.max(...xs).toFixed(digits) : 'nan';

/** The summary line of one run. */
export function summaryLine(s: SummaryInput): string {
  const { results } = s;
  const vmSteps = results.reduce((n, r) => n + r.vmsOk, 0);
  const lib = finite(results.map((r) => r.libvirtBackS));
  // The engine restarts' windows are a figure of their own: everything starts again there, not nova-compute alone.
  const engineStep = (r: StepResult): boolean => r.step.startsWith(DOCKERD_STEP);
  const up = finite(results.filter((r) => !engineStep(r)).map((r) => r.computeUpS));
  const dockerdUp = finite(results.filter(engineStep).map((r) => r.computeUpS));
  const dockerdLost =
    s.ping && dockerdUp.length
      ? String(
          Object.entries(s.ping.lossesByWindow)
            .filter(([w]) => w.startsWith(DOCKERD_STEP))
            .reduce((n, [, l]) => n + l, 0),
        )
      : 'nan';
  // The floor of a nova-compute step's window: nova-compute's own start -> up, fastest in this run.
  const floor = finite(results.map((r) => r.computeStartToUpS));
  const census = results.reduce((n, r) => n + r.censusMismatches, 0);
  return (
    `openstack_vms_survived=${vmSteps}/${s.checked} nova_managed_after=${s.managed} census_mismatches=${census} shipped_set=${s.shippedSet} ` +
    `rabbit_outage_restarts=${s.rabbitOutageRestarts ?? 'nan'} dockerd_restart_vm_lost=${dockerdLost} ` +
    `max_libvirt_window_s=${max(lib, 2)} max_compute_up_s=${max(up, 1)} compute_up_floor_s=${floor.length ? Math.min(...floor).toFixed(1) : 'nan'} dockerd_compute_up_s=${max(dockerdUp, 1)} network_ok=${s.networkOk}/${s.steps} ` +
    (s.ping?.summary ?? 'vm_ping_sent=0 vm_ping_lost=nan max_ping_gap_ms=nan ns_ping_sent=0 ns_ping_lost=nan')
  );
}

/** The Open vSwitch variant's vswitchd upgrade step (test/e2e/openstack-ovs-steps.ts). */
export const VSWITCHD_STEP = 'ovs-vswitchd-upgrade';
/** The steps that replace vswitchd (its own upgrade, and the whole set's): loss there is physical on the userspace datapath. */
export const VSWITCHD_STEPS: readonly string[] = [VSWITCHD_STEP, 'ovs-compute-set-upgrade'];

/** The losses of `byWindow` outside the steps that replace vswitchd. */
export function lostOutsideVswitchd(byWindow: Readonly<Record<string, number>>): number {
  return Object.entries(byWindow)
    .filter(([w]) => !VSWITCHD_STEPS.includes(w))
    .reduce((n, [, l]) => n + l, 0);
}

export interface OvsSummaryInput {
  readonly results: readonly StepResult[];
  readonly checked: number;
  readonly steps: number;
  readonly shippedSet: number;
  readonly networkOk: number;
  readonly ping: PingReport | undefined;
}

/**
 * The longest time without a reply whose end fell in `step`'s window (host
 * time), over every guest direction: the forwarding gap of that step.
 */
export function gapInWindow(ping: PingReport, from: number, to: number): number {
  let gap = 0;
  for (const { d } of ping.directions) {
    if (d.offsetS === undefined) continue;
    const end = d.maxGapEndMs / 1000 + d.offsetS;
    if (end >= from && end <= to + 1) gap = Math.max(gap, d.maxGapMs);
  }
  return gap;
}

/**
 * The Open vSwitch variant's line: its VMs' survival, the pings (the whole
 * variant), and the vswitchd upgrade's own losses (guests' and the DHCP
 * namespace's) and gap, the only step where loss is physical on the
 * userspace datapath; `lost_outside_vswitchd` is every loss outside the
 * steps that replace vswitchd (its own upgrade and the whole set's).
 */
export function ovsSummaryLine(s: OvsSummaryInput, vswitchd?: { from: number; to: number }): string {
  const vmSteps = s.results.reduce((n, r) => n + r.vmsOk, 0);
  const census = s.results.reduce((n, r) => n + r.censusMismatches, 0);
  const p = s.ping;
  const inStep = p
    ? (p.lossesByWindow[VSWITCHD_STEP] ?? 0) + (p.nsLossesByWindow[VSWITCHD_STEP] ?? 0)
    : Number.NaN;
  const outside = p
    ? lostOutsideVswitchd(p.lossesByWindow) + lostOutsideVswitchd(p.nsLossesByWindow)
    : Number.NaN;
  const gap = p && vswitchd ? gapInWindow(p, vswitchd.from, vswitchd.to) : Number.NaN;
  return (
    `network=ovs ovs_vms_survived=${vmSteps}/${s.checked} census_mismatches=${census} shipped_set=${s.shippedSet} network_ok=${s.networkOk}/${s.steps} ` +
    (p?.summary ?? 'vm_ping_sent=0 vm_ping_lost=nan max_ping_gap_ms=nan ns_ping_sent=0 ns_ping_lost=nan') +
    ` vswitchd_upgrade_lost=${inStep} vswitchd_window_ms=${gap} lost_outside_vswitchd=${outside}`
  );
}
