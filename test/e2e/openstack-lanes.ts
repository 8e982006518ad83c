/**
 * Which checked steps an OpenStack end-to-end run takes. `npm run
 * e2e:openstack` (and e2e:adopt) set SPCD_E2E_STEPS=full: every step of
 * every variant. The CI lane (`npm test`, vitest directly) takes a shorter
 * list, so that `.ci/run` stays within its 45 minutes with the three
 * variants on one control plane: the Linux bridge variant's control
 * restarts are the three containers the compute host's ports and agents
 * depend on, its agent's steps (6 and 7) are left out, and the Open vSwitch
 * variant leaves out the steps the other variants also take (restart
 * nova_libvirt, upgrade nova_compute, SIGKILL mid agent upgrade, the control
 * restarts, the whole set). docs/explanation/openstack-proof.md lists both.
 */
export const FULL_STEPS = process.env.SPCD_E2E_STEPS === 'full' || process.env.SPCD_E2E_OVS_STEPS === 'full';

/** The control containers the compute host's ports and agents depend on. */
const CONTROL_DEFAULT = ['neutron_server', 'neutron_dhcp_agent', 'rabbitmq'];

/** CONTROL_DEFAULT's members among `all` (under the run's container names, `name`). */
export function controlDefault(all: readonly string[]): string[] {
  return CONTROL_DEFAULT.filter((c) => all.includes(c));
}
