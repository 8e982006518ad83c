import { describe, expect, it } from 'vitest';
import type { PingReport } from '../../test/e2e/openstack-ping.js';
import type { StepResult } from '../../test/e2e/openstack-steps.js';
import { lostElsewhere, ovsSummaryLine } from '../../test/e2e/openstack-summary.js';

/**
 * The Open vSwitch and OVN variants' last lines, which
 * test/e2e/run-openstack-e2e.sh checks field by field: each variant's own
 * step names, its losses in the measured steps apart from the rest.
 */
const step = (name: string): StepResult => ({
  step: name,
  vmsOk: 2,
  libvirtBackS: Number.NaN,
  computeUpS: 4,
  computeStartToUpS: Number.NaN,
  computeEnabledS: 4,
  spcd: '',
  censusMismatches: 0,
  failures: [],
});

function ping(lossesByWindow: Record<string, number>): PingReport {
  const lost = Object.values(lossesByWindow).reduce((a, b) => a + b, 0);
  return {
    directions: [],
    withNs: true,
    ns: [],
    nsSent: 800,
    nsLost: 0,
    sent: 1600,
    lost,
    maxGapMs: 1230,
    restarts: 0,
    stepLines: [],
    lossesByWindow,
    nsLossesByWindow: {},
    summary: `vm_ping_sent=1600 vm_ping_lost=${lost}`,
  };
}

describe('the Open vSwitch and OVN summary lines', () => {
  it('the OVN line counts its own steps, and says Nova still manages the VMs', () => {
    const p = ping({ 'ovn-vswitchd-upgrade': 9, 'ovn-db-upgrade': 1 });
    const line = ovsSummaryLine({
      network: 'ovn',
      results: ['ovn-db-upgrade', 'ovn-vswitchd-upgrade'].map(step),
      checked: 4,
      steps: 2,
      shippedSet: 1,
      networkOk: 2,
      ping: p,
      vswitchdRestartMs: 583,
      managed: 1,
    });
    expect(line).toMatch(
      /^network=ovn ovn_vms_survived=4\/4 census_mismatches=0 shipped_set=1 network_ok=2\/2 /,
    );
    expect(line).toContain(' ovsdb_upgrade_lost=1 vswitchd_upgrade_lost=9 ');
    // OVSDB's upgrade is held to 0: its loss counts as elsewhere.
    expect(line).toContain(' vswitchd_restart_ms=583 lost_elsewhere=1 nova_managed_after=1');
  });

  it('the Open vSwitch line keeps its fields and has no Nova field', () => {
    const line = ovsSummaryLine({
      results: [step('ovs-vswitchd-upgrade')],
      checked: 2,
      steps: 1,
      shippedSet: 1,
      networkOk: 1,
      ping: ping({ 'ovs-vswitchd-upgrade': 5 }),
    });
    expect(line).toMatch(/^network=ovs ovs_vms_survived=2\/2 /);
    expect(line).toContain(' vswitchd_upgrade_lost=5 ');
    expect(line).toMatch(/ lost_elsewhere=0$/);
  });

  it('a loss in any step but the upgrades of vswitchd and the set counts as elsewhere, in both variants', () => {
    expect(lostElsewhere({ 'ovn-controller-restart': 1, 'ovn-compute-set-upgrade': 7 })).toBe(1);
    expect(lostElsewhere({ 'ovs-agent-upgrade': 2, 'ovs-db-upgrade': 3, 'ovs-vswitchd-upgrade': 9 })).toBe(5);
    expect(lostElsewhere({ 'ovn-db-upgrade': 1, 'ovn-vswitchd-upgrade': 13 })).toBe(1);
  });
});
