/**
 * The OpenStack end-to-end run moves its one compute host from one network
 * variant to the next on the same control plane (openstack-e2e-run.ts):
 * Linux bridge to the shipped Open vSwitch set, then Open vSwitch to the
 * same host as kolla-ansible builds it, which spcd adopts.
 */
import { waitFor } from '../support/wait.js';
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import type { NetVariant } from './openstack-net-variant.js';
import { leaveLinuxBridge, ovsComputeFiles } from './openstack-ovs.js';

/** The variant's VMs and network deleted, and the VMs gone from Nova. */
async function emptied(e2e: OpenStackE2eRun, v: NetVariant): Promise<void> {
  await v.remove();
  for (const vm of v.vms)
    await waitFor(
      `${vm.domain} gone from Nova`,
      async () => (await e2e.openstack.server(vm.id)) === undefined,
      {
        timeoutMs: 300_000,
        intervalMs: 1000,
      },
    );
}

/**
 * From the Linux bridge variant to the Open vSwitch one: the Linux bridge
 * VMs and network deleted, the shipped Open vSwitch compute set and its host
 * overrides written, spcd reloaded (it removes the Linux bridge agent,
 * starts Open vSwitch and its agent, and replaces the containers whose
 * config changed: nova_compute, the DHCP agent), nova-compute up again; then
 * the variant starts.
 */
export async function switchToOvs(e2e: OpenStackE2eRun): Promise<void> {
  const t0 = Date.now();
  await emptied(e2e, e2e.lb);
  e2e.ovs.shippedSet = ovsComputeFiles(e2e.sb!, e2e.rendering!);
  const tReload = Date.now();
  await e2e.api.post('/v1/reload', {});
  console.log(
    `switch: reloaded; linux bridge leftovers: ${(await leaveLinuxBridge(e2e.openstack, e2e.hostNet!.iface)).join(', ') || 'none'}`,
  );
  e2e.current = e2e.ovs;
  await e2e.computeUp(tReload, 900_000);
  console.log(`switch: nova-compute up ${((Date.now() - tReload) / 1000).toFixed(1)} s after the reload`);
  await e2e.ovs.start();
  console.log(`switch to Open vSwitch took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

/**
 * From spcd's Open vSwitch compute set to the same host built by
 * kolla-ansible (openstack-adopt.ts): the variant's VMs deleted when it ran,
 * the host switched, two VMs booted on it.
 */
export async function switchToKolla(e2e: OpenStackE2eRun): Promise<void> {
  const t0 = Date.now();
  if (e2e.ovs.vms.length) await emptied(e2e, e2e.ovs);
  await e2e.adoption!.switchHost();
  e2e.current = e2e.adopt;
  await e2e.adopt.start();
  console.log(`switch to the kolla-ansible host took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
