/**
 * The OVN variant's checked steps (docs/explanation/openstack-proof.md),
 * registered by test/integration/openstack-e2e.test.ts with
 * SPCD_E2E_NETWORK=ovn: a run of its own, whose control plane runs
 * neutron-server on ML2/OVN and OVN's central services from the start
 * (openstack-ovn.ts). Every step goes through spcd's API, and after each the
 * VMs' survival and the network are checked as in the other variants:
 *   1. restart nova_libvirt;  2. upgrade nova_compute;
 *   3. restart ovn_controller;  4. upgrade ovn_controller;
 *   5. SIGKILL spcd in the middle of ovn_controller's upgrade, start it again;
 *   6. restart the control containers the chassis depends on (neutron_server,
 *      the northbound and southbound databases, ovn-northd, RabbitMQ), each
 *      until spcd reports it healthy;
 *   7. upgrade openvswitch_db (OVSDB's database and every port kept);
 *   8. upgrade openvswitch_vswitchd (the forwarding process itself on the
 *      userspace datapath: its losses are measured);
 *   9. upgrade the whole compute set (vswitchd among its members: measured).
 * Steps 1, 2, 5, 6 and 9 run with SPCD_E2E_STEPS=full (`npm run
 * e2e:openstack` sets it). Then every ping packet is counted, each loss
 * placed in its step: none may be lost outside 8 and 9; then Nova stops
 * and starts one VM and deletes the other.
 */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import * as cs from './openstack-control-steps.js';
import { ovsdbStep, setUpgradeStep, vswitchdStep } from './openstack-summary.js';
import { lostOnlyWhereMeasured, variantStepKit } from './openstack-ovs-steps.js';
import { novaManages } from './openstack-steps.js';
import { OVN_COMPUTE_SET } from './openstack-ovn.js';
import { vswitchdRestartMs } from '../support/ovs-node.js';
import { FULL_STEPS } from './openstack-lanes.js';

const FULL = FULL_STEPS;
/** Step 6's containers: the chassis's control plane. */
export const OVN_CONTROL = ['neutron_server', 'ovn_nb_db', 'ovn_sb_db', 'ovn_northd', 'rabbitmq'];

/** Checked steps of the variant (the summary's network_ok denominator). */
export function ovnStepCount(): number {
  return FULL ? 8 + OVN_CONTROL.length : 4;
}

/** Registers the variant's describe block on `e2e`. */
export function ovnSteps(e2e: OpenStackE2eRun): void {
  const { name, ctl, actions } = e2e;
  const { restart, killMidUpgrade } = actions;
  const v = e2e.ovn;
  const { step, next, upgradeStep } = variantStepKit(e2e, v, 'ovn');

  describe('OVN: the shipped OVN compute set and ML2/OVN, every lost packet counted', () => {
    it.runIf(FULL)(
      '1: restart nova_libvirt',
      () => step('ovn-libvirt-restart', () => restart(name('nova_libvirt'))),
      1_200_000,
    );
    it.runIf(FULL)(
      '2: upgrade nova_compute',
      () => upgradeStep('ovn-compute-upgrade', 'nova_compute'),
      1_200_000,
    );
    it(
      '3: restart ovn_controller',
      () => step('ovn-controller-restart', () => restart(name('ovn_controller'))),
      1_200_000,
    );
    it('4: upgrade ovn_controller', () => upgradeStep('ovn-controller-upgrade', 'ovn_controller'), 1_200_000);
    it.runIf(FULL)(
      '5: SIGKILL spcd mid ovn_controller upgrade, start it again',
      async () => {
        const image = await next('ovn_controller', 'killed');
        await step('ovn-controller-upgrade-spcd-killed', () => killMidUpgrade(name('ovn_controller'), image));
      },
      1_200_000,
    );
    it.runIf(FULL)(
      '6: restart the control containers the chassis depends on, each until spcd reports it healthy',
      async () => {
        for (const c of OVN_CONTROL)
          await step(`ovn-control-restart-${c}`, () =>
            cs.restartControl(ctl, actions, e2e.openstack, name(c), c),
          );
      },
      OVN_CONTROL.length * 1_200_000,
    );
    it('7: upgrade openvswitch_db', () => upgradeStep(ovsdbStep('ovn'), 'openvswitch_db'), 1_200_000);
    it('8: upgrade openvswitch_vswitchd', async () => {
      await upgradeStep(vswitchdStep('ovn'), 'openvswitch_vswitchd');
      v.vswitchdRestartMs = await vswitchdRestartMs(name('openvswitch_vswitchd'));
    }, 1_200_000);
    it.runIf(FULL)(
      '9: upgrade the whole compute set',
      async () => {
        const { set, containers } = cs.setMembers(OVN_COMPUTE_SET);
        const images = await cs.setTargets(ctl, containers.map(name), 'ovnset');
        await step(setUpgradeStep('ovn'), () => cs.upgradeSet(ctl, set, images));
      },
      2_400_000,
    );

    it(
      'no packet lost outside the upgrades of vswitchd and the set, each direction counted in its guest and from the physnet',
      () => lostOnlyWhereMeasured(v, 'ovn'),
      180_000,
    );

    it('Nova still manages them: stops and starts one VM, deletes the other', async () => {
      await novaManages(e2e.openstack, join(e2e.root, 'libvirt'), v.vms);
      e2e.ovnManaged = 1;
    }, 1_200_000);
  });
}
