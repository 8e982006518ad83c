import { describe, expect, it } from 'vitest';
import type { PingReport } from '../../test/e2e/openstack-ping.js';
import type { StepResult } from '../../test/e2e/openstack-steps.js';
import { adoptSummaryLine, ADOPT_STEP } from '../../test/e2e/openstack-summary.js';

/**
 * The adoption variant's last line, which test/e2e/run-openstack-e2e.sh
 * checks field by field: the takeover's counts first, the VMs' losses in
 * the whole variant and in the takeover step apart.
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
    maxGapMs: 3100,
    restarts: 0,
    stepLines: [],
    lossesByWindow,
    nsLossesByWindow: {},
    summary: '',
  };
}

const base = {
  results: [step(ADOPT_STEP), step('adopt-agent-upgrade')],
  checked: 4,
  steps: 2,
  networkOk: 2,
  managed: 1,
  containers: 5,
  adopted: 5,
  restarts: 0,
  unitsRetired: 5,
  unitsRefused: 5,
  adoptS: 6.84,
};

describe('adoptSummaryLine', () => {
  it("puts the takeover's counts first and its own losses apart from the variant's", () => {
    expect(adoptSummaryLine({ ...base, ping: ping({ 'adopt-agent-upgrade': 9 }) })).toBe(
      'adopted=5/5 adopt_restarts=0 units_retired=5 units_refused=5 vm_ping_lost=9 adopt_step_lost=0 ' +
        'openstack_vms_survived=4/4 nova_managed_after=1 adopt_s=6.8 census_mismatches=0 network_ok=2/2 ' +
        'vm_ping_sent=1600 max_ping_gap_ms=3100 ns_ping_sent=800 ns_ping_lost=0 vm_wire_lost=nan',
    );
    expect(adoptSummaryLine({ ...base, ping: ping({ [ADOPT_STEP]: 2 }) })).toContain(
      'vm_ping_lost=2 adopt_step_lost=2 ',
    );
    expect(adoptSummaryLine({ ...base, ping: ping({}), wireLost: 0 })).toMatch(
      / ns_ping_lost=0 vm_wire_lost=0$/,
    );
  });

  it('says nan where the pings were never counted', () => {
    expect(adoptSummaryLine({ ...base, ping: undefined, restarts: Number.NaN, adoptS: Number.NaN })).toMatch(
      /^adopted=5\/5 adopt_restarts=NaN units_retired=5 units_refused=5 vm_ping_lost=nan adopt_step_lost=nan .* adopt_s=nan .* ns_ping_lost=nan vm_wire_lost=nan$/,
    );
  });
});
