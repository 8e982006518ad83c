/**
 * The last line of the OpenStack end-to-end test (test/e2e/run-openstack-e2e.sh
 * prints it last and checks its fields): every VM's survival, Nova, the
 * windows of the steps and the pings counted in them.
 */
import type { PingReport } from './openstack-ping.js';
import type { StepResult } from './openstack-steps.js';

/** The adoption variant's takeover step (test/e2e/openstack-adopt-steps.ts). */
export const ADOPT_STEP = 'adopt';

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

/** The Open vSwitch and OVN variants (their lines' `network=`). */
export type OvsNetwork = 'ovs' | 'ovn';
/** A variant's vswitchd and openvswitch_db upgrade steps, and its whole set's (openstack-ovs-steps.ts, openstack-ovn-steps.ts). */
export const vswitchdStep = (n: OvsNetwork): string => `${n}-vswitchd-upgrade`;
export const ovsdbStep = (n: OvsNetwork): string => `${n}-db-upgrade`;
export const setUpgradeStep = (n: OvsNetwork): string => `${n}-compute-set-upgrade`;
export const VSWITCHD_STEP = vswitchdStep('ovs');
export const OVSDB_STEP = ovsdbStep('ovs');
/**
 * The steps whose losses are measured, not held to 0: the two that replace
 * vswitchd (its own upgrade and the whole set's), which on the userspace
 * datapath replace the forwarding process itself. OVSDB's upgrade is held
 * to 0: the few packets it lost between the VMs in earlier runs were lost
 * inside the guests, whose busybox ping dropped replies when starved of
 * CPU (docs/explanation/adoption-proof.md); with iputils in the guests it
 * has lost none.
 */
export const MEASURED_LOSS_STEPS: readonly string[] = (['ovs', 'ovn'] as const).flatMap((n) => [
  vswitchdStep(n),
  setUpgradeStep(n),
]);

/** The losses of `byWindow` outside MEASURED_LOSS_STEPS: every one fails the variant. */
export function lostElsewhere(byWindow: Readonly<Record<string, number>>): number {
  return Object.entries(byWindow)
    .filter(([w]) => !MEASURED_LOSS_STEPS.includes(w))
    .reduce((n, [, l]) => n + l, 0);
}

/** Losses in `step`, both guest directions and both namespace directions. */
function lostIn(p: PingReport, step: string): number {
  return (p.lossesByWindow[step] ?? 0) + (p.nsLossesByWindow[step] ?? 0);
}

/** The guests' ping interval (scripts/libvirt/guest/net): a window from a count of losses is known to it. */
const PING_INTERVAL_MS = 200;

export interface OvsSummaryInput {
  /** Which variant (default ovs). */
  readonly network?: OvsNetwork;
  readonly results: readonly StepResult[];
  readonly checked: number;
  readonly steps: number;
  readonly shippedSet: number;
  readonly networkOk: number;
  readonly ping: PingReport | undefined;
  /** 1 once Nova stopped, started and deleted the variant's VMs (the OVN variant's line only). */
  readonly managed?: number;
  /** vswitchd's own restart in its upgrade step (start-ovs.log: the old one's exit after the save, plus the new one's start to forwarding). */
  readonly vswitchdRestartMs?: number;
}

/**
 * The step's forwarding gap: the longest time without a reply whose end fell
 * in its window (host time), over every guest direction; when no direction's
 * longest gap can be placed there (the guest clock drifts under TCG), the
 * most packets one direction lost in it, plus one, times the interval.
 */
export function gapInWindow(ping: PingReport, w: { name: string; from: number; to: number }): number {
  let gap = 0;
  let lost = 0;
  for (const { d } of [...ping.directions, ...ping.ns]) {
    lost = Math.max(lost, d.lossesByWindow[w.name] ?? 0);
    if (d.offsetS === undefined) continue;
    const end = d.maxGapEndMs / 1000 + d.offsetS;
    if (end >= w.from && end <= w.to + 1) gap = Math.max(gap, d.maxGapMs);
  }
  return gap || (lost ? (lost + 1) * PING_INTERVAL_MS : 0);
}

/**
 * The Open vSwitch variant's line: its VMs' survival, the pings (the whole
 * variant), OVSDB's and vswitchd's upgrades' own losses (guests' and the
 * DHCP namespace's), vswitchd's gap and its own restart (the part of the
 * gap that is vswitchd's, against the rest: spcd and the engine); `lost_elsewhere` is every loss
 * outside MEASURED_LOSS_STEPS (0, or the variant fails).
 */
export function ovsSummaryLine(
  s: OvsSummaryInput,
  vswitchd?: { name: string; from: number; to: number },
): string {
  const vmSteps = s.results.reduce((n, r) => n + r.vmsOk, 0);
  const census = s.results.reduce((n, r) => n + r.censusMismatches, 0);
  const p = s.ping;
  const nan = Number.NaN;
  const elsewhere = p ? lostElsewhere(p.lossesByWindow) + lostElsewhere(p.nsLossesByWindow) : nan;
  const gap = p && vswitchd ? gapInWindow(p, vswitchd) : nan;
  const n = s.network ?? 'ovs';
  return (
    `network=${n} ${n}_vms_survived=${vmSteps}/${s.checked} census_mismatches=${census} shipped_set=${s.shippedSet} network_ok=${s.networkOk}/${s.steps} ` +
    (p?.summary ?? 'vm_ping_sent=0 vm_ping_lost=nan max_ping_gap_ms=nan ns_ping_sent=0 ns_ping_lost=nan') +
    ` ovsdb_upgrade_lost=${p ? lostIn(p, ovsdbStep(n)) : nan} vswitchd_upgrade_lost=${p ? lostIn(p, vswitchdStep(n)) : nan}` +
    ` vswitchd_window_ms=${gap} vswitchd_restart_ms=${s.vswitchdRestartMs ?? nan} lost_elsewhere=${elsewhere}` +
    (s.managed === undefined ? '' : ` nova_managed_after=${s.managed}`)
  );
}

export interface AdoptSummaryInput {
  readonly results: readonly StepResult[];
  readonly checked: number;
  readonly steps: number;
  readonly networkOk: number;
  readonly ping: PingReport | undefined;
  readonly managed: number;
  readonly containers: number;
  readonly adopted: number;
  /** Adopted containers whose id, StartedAt or RestartCount changed (0, or the variant fails). */
  readonly restarts: number;
  readonly unitsRetired: number;
  readonly unitsRefused: number;
  readonly adoptS: number;
  /** VM pings the host lost on its path from tap to tap (tap-capture.ts); undefined when not captured. */
  readonly wireLost?: number | undefined;
}

/**
 * The adoption variant's line (test/e2e/openstack-adopt-steps.ts): the
 * takeover's counts first, then the pings (the whole variant's, and the
 * takeover step's own), the VMs through every step, and the rest.
 */
export function adoptSummaryLine(s: AdoptSummaryInput): string {
  const vmSteps = s.results.reduce((n, r) => n + r.vmsOk, 0);
  const census = s.results.reduce((n, r) => n + r.censusMismatches, 0);
  const p = s.ping;
  return (
    `adopted=${s.adopted}/${s.containers} adopt_restarts=${s.restarts} units_retired=${s.unitsRetired} units_refused=${s.unitsRefused} ` +
    `vm_ping_lost=${p ? p.lost : 'nan'} adopt_step_lost=${p ? (p.lossesByWindow[ADOPT_STEP] ?? 0) + (p.nsLossesByWindow[ADOPT_STEP] ?? 0) : 'nan'} openstack_vms_survived=${vmSteps}/${s.checked} nova_managed_after=${s.managed} ` +
    `adopt_s=${Number.isFinite(s.adoptS) ? s.adoptS.toFixed(1) : 'nan'} census_mismatches=${census} network_ok=${s.networkOk}/${s.steps} ` +
    `vm_ping_sent=${p ? p.sent : 0} max_ping_gap_ms=${p ? p.maxGapMs : 'nan'} ns_ping_sent=${p ? p.nsSent : 0} ns_ping_lost=${p ? p.nsLost : 'nan'} vm_wire_lost=${s.wireLost ?? 'nan'}`
  );
}
