/**
 * The adoption variant's checked steps (docs/explanation/openstack-proof.md),
 * registered by test/integration/openstack-e2e.test.ts after the Open
 * vSwitch variant's on the same control plane (or alone with
 * SPCD_E2E_NETWORK=adopt: `npm run e2e:adopt`). The compute host becomes
 * one kolla-ansible built (test/e2e/openstack-kolla.ts), two VMs boot on it
 * and ping each other, and then, after each step, the same checks as the
 * other variants (the same qemu PIDs, no console counter value missing,
 * the domain census, both VMs ACTIVE, nova-compute up, the ports plugged):
 *   1. adopt: the scan kept as the set with spcd's checks added, the plan
 *      saying adopt for each container and nothing else, kolla-ansible's
 *      units retired, each container adopted on the operator's word, spcd
 *      killed with SIGKILL once before an adoption's record and once after
 *      another's; every container the same one (id, StartedAt, RestartCount);
 *   2. upgrade nova_libvirt (an adopted container's first replacement);
 *   3. nova_compute's entry changed (a new image, and /proc/sys unmasked as
 *      privileged would leave it on a real host), reloaded: spcd replaces it;
 *   4. upgrade neutron_openvswitch_agent;
 *   5. a config value changed in /etc/kolla/nova-compute/nova.conf and
 *      nova_compute restarted through spcd.
 * Then every ping is counted, each loss placed in its step: none may be lost
 * in any step, between the VMs (counted in the guests, and on the host from
 * tap to tap: tap-capture.ts) or from the DHCP namespace
 * (docs/explanation/adoption-proof.md). Nova then still stops, starts and
 * deletes the VMs.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pingProcesses } from './ns-ping.js';
import * as cs from './openstack-control-steps.js';
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import { VM_IPS } from './openstack-ping.js';
import { novaManages, type Acted } from './openstack-steps.js';
import { ADOPT_STEP } from './openstack-summary.js';
import { switchToKolla } from './openstack-switch.js';
import { agentLogIn } from './openstack-adopt.js';
import { TapCapture, tapIndex, wireLine, wireTally } from './tap-capture.js';

/** Checked steps of the variant (the summary's denominators). */
export const ADOPT_STEPS = 5;

/** Registers the variant's describe block on `e2e`. */
export function adoptSteps(e2e: OpenStackE2eRun): void {
  const v = e2e.adopt;
  const step = async (label: string, act: () => Promise<Acted>): Promise<void> => {
    const r = await v.step(label, act);
    expect(r.failures, r.failures.join('; ')).toEqual([]);
    expect(r.vmsOk).toBe(2);
  };
  let capture: TapCapture | undefined;
  let taps: Map<string, number> | undefined;
  const next = async (svc: string): Promise<string> =>
    cs.labelledImage((await e2e.api.container(svc)).image, 'adopt');

  describe('a host kolla-ansible built, adopted by spcd under two running VMs', () => {
    afterAll(() => capture?.close());
    it('the compute host rebuilt by kolla-ansible, two VMs on it pinging', async () => {
      await switchToKolla(e2e);
      // The host's own count of the VMs' pings, tap to tap (tap-capture.ts).
      taps = new Map(VM_IPS.map((ip, i) => [ip, tapIndex(v.made.ports[i]!)]));
      capture = await TapCapture.start(e2e.root, VM_IPS);
    }, 1_800_000);
    it('1: adopt every container, spcd killed twice in the middle, none restarted', async () => {
      await step(ADOPT_STEP, () => e2e.adoption!.adoptHost());
      const f = e2e.adoption!.figures;
      expect(f.restarts).toBe(0);
      expect(f.adopted).toBe(5);
      expect(f.unitsRetired).toBe(5);
      expect(f.unitsRefused).toBe(5);
    }, 1_200_000);
    it('2: upgrade the adopted nova_libvirt', async () => {
      const image = await next('nova_libvirt');
      await step('adopt-libvirt-upgrade', () => e2e.actions.upgrade('nova_libvirt', image));
    }, 1_200_000);
    it("3: change nova_compute's entry, reload", async () => {
      const image = await next('nova_compute');
      await step('adopt-compute-entry', () =>
        e2e.adoption!.changeEntry('nova_compute', (entry) => {
          entry.image = image;
          // Where a real host's entry says privileged: true (this VM cannot start it).
          entry.security_opt = ['systempaths=unconfined'];
        }),
      );
    }, 1_200_000);
    it('4: upgrade the adopted neutron_openvswitch_agent', async () => {
      const image = await next('neutron_openvswitch_agent');
      await step('adopt-agent-upgrade', () => e2e.actions.upgrade('neutron_openvswitch_agent', image));
    }, 1_200_000);
    it('5: change a config value in /etc/kolla, restart nova_compute through spcd', async () => {
      await step('adopt-config-change', () => e2e.adoption!.changeConfig('update_resources_interval', '20'));
    }, 1_200_000);

    it('not one ping lost in any step: between the VMs (in the guests and on the host) nor from the DHCP namespace', async () => {
      const { ping, left } = await v.closePings('adopt');
      const cap = await capture!.stop();
      const wire = wireTally(cap.lines, taps!, v.windows);
      v.wireLost = cap.dropped === 0 ? wire.lost : undefined;
      console.log(`adopt ${wireLine(wire, cap.dropped)}`);
      for (const w of v.windows.filter((x) => (ping.lossesByWindow[x.name] ?? 0) > 0))
        console.log(
          `adopt: the agent in ${w.name}, where packets were lost:\n  ${(await agentLogIn(w)).join('\n  ')}`,
        );
      expect(ping.restarts, 'a pinger started its sequence again').toBe(0);
      expect(ping.sent).toBeGreaterThan(0);
      expect(ping.lossesByWindow[ADOPT_STEP] ?? 0, ping.stepLines.join('\n')).toBe(0);
      expect(ping.lost, `${ping.summary}\n${ping.stepLines.join('\n')}`).toBe(0);
      expect(ping.nsSent).toBeGreaterThan(0);
      expect(ping.nsLost, ping.summary).toBe(0);
      // Every VM ping the guests sent in the steps was carried from tap to tap; a guest's own loss is then its own.
      expect(wire.seen, 'the capture saw no VM ping in the steps').toBeGreaterThan(0);
      expect(cap.dropped, 'tcpdump dropped packets: the host count cannot be read').toBe(0);
      expect(wire.lost, wireLine(wire, cap.dropped)).toBe(0);
      expect(left, 'a namespace pinger outlived its stop').toEqual([]);
      expect(pingProcesses(VM_IPS)).toEqual([]);
    }, 180_000);

    it('Nova still manages them: stops and starts one VM, deletes the other', async () => {
      await novaManages(e2e.openstack, join(e2e.root, 'libvirt'), v.vms);
      e2e.adoptManaged = 1;
    }, 1_200_000);
  });
}
