/**
 * The Open vSwitch variant's checked steps (docs/explanation/openstack-proof.md),
 * registered by test/integration/openstack-e2e.test.ts after the Linux
 * bridge variant's on the same control plane (or alone with
 * SPCD_E2E_NETWORK=ovs). Every step goes through spcd's API, and after each
 * the VMs' survival and the network are checked as in the Linux bridge
 * variant:
 *   1. restart nova_libvirt;  2. upgrade nova_compute;
 *   3. upgrade neutron_openvswitch_agent;
 *   4. SIGKILL spcd in the middle of the agent's upgrade, start it again;
 *   5. restart the control containers Open vSwitch's ports depend on
 *      (neutron_server, the DHCP agent, RabbitMQ; every control container
 *      with SPCD_E2E_OVS_CONTROL=all);
 *   6. upgrade openvswitch_db (OVSDB's database and every port kept) with
 *      the agent stopped around it: Neutron Zed's agent, connected while
 *      OVSDB restarts, takes its physical bridges for re-created and
 *      resyncs, and VM-to-VM traffic was dropped for up to 3 s
 *      (docs/explanation/openvswitch-proof.md);
 *   7. upgrade openvswitch_vswitchd (the flows saved at the stop and back
 *      before forwarding resumes: the only step where the userspace datapath
 *      loses packets, the forwarding process itself being replaced);
 *   8. upgrade the whole compute set (vswitchd among its members).
 * Steps 1, 2, 4, 5 and 8 run with SPCD_E2E_STEPS=full (`npm run
 * e2e:openstack` sets it; openstack-lanes.ts); the CI lane runs 3, 6 and 7.
 * Then every ping packet is counted, each loss placed in its step: none may
 * be lost outside 7 and 8, whose losses are measured (the summary line's
 * vswitchd_upgrade_lost: both replace vswitchd, the forwarding process
 * itself on the userspace datapath). Step 6 is held to 0 too (its line's
 * ovsdb_upgrade_lost): the few packets it lost in earlier runs were lost in
 * the guests' busybox ping (docs/explanation/adoption-proof.md).
 */
import { describe, expect, it } from 'vitest';
import { pingProcesses } from './ns-ping.js';
import type { SpcdControl } from './openstack-actions.js';
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import * as cs from './openstack-control-steps.js';
import { VM_IPS } from './openstack-ping.js';
import type { NetVariant } from './openstack-net-variant.js';
import { lostElsewhere, OVSDB_STEP, VSWITCHD_STEP } from './openstack-summary.js';
import type { Acted } from './openstack-steps.js';
import { OVS_COMPUTE_SET } from './openstack-ovs.js';
import { vswitchdRestartMs } from '../support/ovs-node.js';
import { switchToOvs } from './openstack-switch.js';
import { controlDefault, FULL_STEPS } from './openstack-lanes.js';

const FULL = FULL_STEPS;

export interface OvsStepOptions {
  /** The Linux bridge variant ran first: switch to Open vSwitch on its control plane. */
  readonly switchFirst: boolean;
  /** Every control container (step 5), or the default three. */
  readonly control: readonly string[];
}

/** Step 5's containers: every one of `all` with SPCD_E2E_OVS_CONTROL=all, else the default three. */
export function ovsControl(all: readonly string[]): string[] {
  return process.env.SPCD_E2E_OVS_CONTROL === 'all' ? [...all] : controlDefault(all);
}

/** Checked steps of the variant (the summary's network_ok denominator). */
export function ovsStepCount(control: readonly string[]): number {
  return FULL ? 7 + control.length : 3;
}

/** An operator's stop or start of `container` through spcd's API, until its operation succeeded. */
async function operatorVerb(ctl: SpcdControl, container: string, verb: 'stop' | 'start'): Promise<void> {
  const c = await ctl.api().container(container);
  const op = await ctl
    .api()
    .post(`/v1/containers/${container}/${verb}`, { expectedGeneration: c.generation });
  const fin = await ctl.tap().finished(op, 300_000);
  if (fin.phase !== 'succeeded')
    throw new Error(`${verb} of ${container} failed: ${JSON.stringify(fin.error)}`);
}

/**
 * The pings of an Open vSwitch or OVN variant closed and counted: none lost
 * outside the steps whose losses are measured (MEASURED_LOSS_STEPS).
 */
export async function lostOnlyWhereMeasured(v: NetVariant, tag: string): Promise<void> {
  const { ping, left } = await v.closePings(tag);
  expect(ping.restarts, 'a pinger started its sequence again').toBe(0);
  expect(ping.sent).toBeGreaterThan(0);
  expect(ping.nsSent).toBeGreaterThan(0);
  expect(lostElsewhere(ping.lossesByWindow), ping.stepLines.join('\n')).toBe(0);
  expect(lostElsewhere(ping.nsLossesByWindow), ping.stepLines.join('\n')).toBe(0);
  expect(left, 'a namespace pinger outlived its stop').toEqual([]);
  expect(pingProcesses(VM_IPS)).toEqual([]);
}

/**
 * A variant's checked step (`step`: both VMs survived, the network whole),
 * the next image of a container (its running image plus one label), and an
 * upgrade to it as one checked step (its label `suffix`).
 */
export function variantStepKit(
  e2e: OpenStackE2eRun,
  v: NetVariant,
  suffix: string,
): {
  step: (label: string, act: () => Promise<Acted>) => Promise<void>;
  next: (svc: string, suffix: string) => Promise<string>;
  upgradeStep: (label: string, svc: string) => Promise<void>;
} {
  const { name, ctl, actions } = e2e;
  const step = async (label: string, act: () => Promise<Acted>): Promise<void> => {
    const r = await v.step(label, act);
    expect(r.failures, r.failures.join('; ')).toEqual([]);
    expect(r.vmsOk).toBe(2);
  };
  const next = async (svc: string, s: string): Promise<string> =>
    cs.labelledImage((await ctl.api().container(name(svc))).image, s);
  const upgradeStep = async (label: string, svc: string): Promise<void> => {
    const image = await next(svc, suffix);
    await step(label, () => actions.upgrade(name(svc), image));
  };
  return { step, next, upgradeStep };
}

/** Registers the variant's describe block on `e2e`. */
export function ovsSteps(e2e: OpenStackE2eRun, o: OvsStepOptions): void {
  const { name, ctl, actions } = e2e;
  const { upgrade, restart, killMidUpgrade } = actions;
  const v = e2e.ovs;
  const { step, next, upgradeStep } = variantStepKit(e2e, v, 'ovs');

  describe('Open vSwitch: the shipped compute set, every lost packet counted', () => {
    it.runIf(o.switchFirst)(
      'switch the compute host to the shipped Open vSwitch set, two VMs on it',
      () => switchToOvs(e2e),
      1_800_000,
    );
    it.runIf(FULL)(
      '1: restart nova_libvirt',
      () => step('ovs-libvirt-restart', () => restart(name('nova_libvirt'))),
      1_200_000,
    );
    it.runIf(FULL)(
      '2: upgrade nova_compute',
      () => upgradeStep('ovs-compute-upgrade', 'nova_compute'),
      1_200_000,
    );
    it(
      '3: upgrade neutron_openvswitch_agent',
      () => upgradeStep('ovs-agent-upgrade', 'neutron_openvswitch_agent'),
      1_200_000,
    );
    it.runIf(FULL)(
      '4: SIGKILL spcd mid agent upgrade, start it again',
      async () => {
        const image = await next('neutron_openvswitch_agent', 'killed');
        await step('ovs-agent-upgrade-spcd-killed', () =>
          killMidUpgrade(name('neutron_openvswitch_agent'), image),
        );
      },
      1_200_000,
    );
    it.runIf(FULL)(
      '5: restart control containers, each until spcd reports it healthy',
      async () => {
        for (const c of o.control)
          await step(`ovs-control-restart-${c}`, () =>
            cs.restartControl(ctl, actions, e2e.openstack, name(c), c),
          );
      },
      Math.max(1, o.control.length) * 1_200_000,
    );
    it('6: upgrade openvswitch_db, the agent stopped around it', async () => {
      const image = await next('openvswitch_db', 'ovs');
      const agent = name('neutron_openvswitch_agent');
      await step(OVSDB_STEP, async () => {
        await operatorVerb(ctl, agent, 'stop');
        try {
          return await upgrade(name('openvswitch_db'), image);
        } finally {
          await operatorVerb(ctl, agent, 'start');
        }
      });
    }, 1_200_000);
    it('7: upgrade openvswitch_vswitchd', async () => {
      await upgradeStep(VSWITCHD_STEP, 'openvswitch_vswitchd');
      v.vswitchdRestartMs = await vswitchdRestartMs(name('openvswitch_vswitchd'));
    }, 1_200_000);
    it.runIf(FULL)(
      '8: upgrade the whole compute set',
      async () => {
        const { set, containers } = cs.setMembers(OVS_COMPUTE_SET);
        const images = await cs.setTargets(ctl, containers.map(name), 'ovsset');
        await step('ovs-compute-set-upgrade', () => cs.upgradeSet(ctl, set, images));
      },
      2_400_000,
    );

    it(
      'no packet lost outside the upgrades of vswitchd and the set, each direction counted in its guest and from the DHCP namespace',
      () => lostOnlyWhereMeasured(v, 'ovs'),
      180_000,
    );
  });
}
