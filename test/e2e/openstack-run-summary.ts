/**
 * The summary lines of one OpenStack end-to-end run
 * (test/e2e/run-openstack-e2e.sh prints them last): one per variant the run
 * took, each from the variant's results (openstack-summary.ts formats them).
 */
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import type { NetVariant } from './openstack-net-variant.js';
import { ADOPT_STEPS } from './openstack-adopt-steps.js';
import { KOLLA_NAMES } from './openstack-kolla.js';
import {
  adoptSummaryLine,
  ovsSummaryLine,
  summaryLine,
  vswitchdStep,
  type OvsNetwork,
} from './openstack-summary.js';

/** What the lines count against: the checked steps of each variant, and the VMs. */
export interface SummaryCounts {
  readonly network: string;
  /** Checked steps of the Linux bridge variant. */
  readonly steps: number;
  readonly ovsSteps: number;
  readonly ovnSteps: number;
  readonly vms: number;
  /** When the run began (Date.now()). */
  readonly t0: number;
}

/** The line of the Open vSwitch or the OVN variant. */
function ovsLine(v: NetVariant, network: OvsNetwork, steps: number, vms: number, managed?: number): string {
  return ovsSummaryLine(
    {
      network,
      managed,
      results: v.results,
      checked: steps * vms,
      steps,
      shippedSet: v.shippedSet,
      networkOk: v.networkOk,
      ping: v.ping,
      vswitchdRestartMs: v.vswitchdRestartMs,
    },
    v.windows.find((w) => w.name === vswitchdStep(network)),
  );
}

function adoptLine(e2e: OpenStackE2eRun, vms: number): string {
  const f = e2e.adoption?.figures;
  return adoptSummaryLine({
    results: e2e.adopt.results,
    checked: ADOPT_STEPS * vms,
    steps: ADOPT_STEPS,
    networkOk: e2e.adopt.networkOk,
    ping: e2e.adopt.ping,
    managed: e2e.adoptManaged,
    containers: KOLLA_NAMES.length,
    adopted: f?.adopted ?? 0,
    restarts: f?.restarts ?? Number.NaN,
    unitsRetired: f?.unitsRetired ?? 0,
    unitsRefused: f?.unitsRefused ?? 0,
    adoptS: f?.adoptS ?? Number.NaN,
    wireLost: e2e.adopt.wireLost,
  });
}

/** The run's total time (printed), then one line per variant the run took. */
export function runSummaries(e2e: OpenStackE2eRun, c: SummaryCounts): string[] {
  console.log(`openstack_e2e_total_s=${((Date.now() - c.t0) / 1000).toFixed(1)}`);
  const all = c.network === 'all';
  const out: string[] = [];
  if (all || c.network === 'lb')
    out.push(
      summaryLine({
        results: e2e.lb.results,
        checked: c.steps * c.vms,
        steps: c.steps,
        managed: e2e.managed,
        shippedSet: e2e.lb.shippedSet,
        rabbitOutageRestarts: e2e.rabbitOutageRestarts,
        networkOk: e2e.lb.networkOk,
        ping: e2e.lb.ping,
      }),
    );
  if (all || c.network === 'ovs') out.push(ovsLine(e2e.ovs, 'ovs', c.ovsSteps, c.vms));
  if (all || c.network === 'adopt') out.push(adoptLine(e2e, c.vms));
  if (c.network === 'ovn') out.push(ovsLine(e2e.ovn, 'ovn', c.ovnSteps, c.vms, e2e.ovnManaged));
  return out;
}
