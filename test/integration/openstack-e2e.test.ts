/**
 * A real OpenStack compute node under spcd (docs/explanation/openstack-proof.md): one spcd
 * runs the test's control and network sets (container-sets-e2e/openstack/)
 * and the shipped Linux bridge compute set, unchanged, with this host's
 * overrides (container-sets-e2e/hosts/). The test uploads the tiny guest to Glance
 * (kernel aki, ramdisk ari, a 1 MiB raw root with kernel_id, ramdisk_id and
 * os_command_line), makes a flat Neutron network on a veth the test made
 * (no uplink: its peer stays down; DHCP from Neutron's agent), checks the Linux bridge and DHCP
 * agents are alive, boots two VMs with a port on it through the Nova API
 * (microversion 2.37), checks their ports ACTIVE, plugged into the bridge and
 * in dnsmasq's hosts, and both guests pinging each other every 200 ms (fixed
 * addresses on ports made first, `spcd.peer=` on the kernel command line;
 * test/e2e/openstack-ping.ts), and then, through spcd's API only:
 *   1. upgrades nova_libvirt bookworm -> trixie (libvirt 9.0 -> 11.3);
 *   2. upgrades nova_compute to a new image;
 *   3. restarts nova_libvirt;  4. restarts nova_compute;
 *   5. kills spcd with SIGKILL in the middle of nova_compute's upgrade
 *      (after the old container stopped) and starts it again;
 *   6. upgrades the Linux bridge agent to a new image;
 *   7. kills spcd with SIGKILL in the middle of the agent's upgrade, starts it again
 *   (a full run only, see LB_AGENT_STEPS);
 *   8. restarts each control container (three in the CI lane), one window each,
 *      until spcd reports it healthy;
 *   9. upgrades the whole compute set (openstack-control-steps.ts);
 *  10. stops RabbitMQ through spcd for a minute and starts it again: every
 *      AMQP client reports it down and up (dependency checks), no container
 *      restarts, nova-compute is up again after (openstack-outage-steps.ts);
 *  11. restarts dockerd with live-restore on: no container restarts and spcd
 *      begins no operation;
 *  12. restarts dockerd with live-restore off (not with SPCD_E2E_DOCKERD_OFF=0):
 *      dockerd stops every container, spcd starts each again
 *      (openstack-dockerd-steps.ts; SPCD_E2E_DOCKERD_STEPS=0 leaves 11 and 12 out).
 * After each: the same qemu PIDs, no missing console counter value, spcd's
 * domain census without mismatch, both VMs ACTIVE in Nova, nova-compute up,
 * both ports still ACTIVE with their taps on the bridge. Then every ping
 * packet of both directions is counted, each loss placed in its step, and so
 * is every ping of both VMs from the DHCP agent's qdhcp namespace
 * (test/e2e/openstack-ns-ping.ts): one lost packet fails the run.
 * Then Nova stops and starts one VM and deletes the other.
 *
 * SPCD_E2E_SUMMARY=FILE: the summary line is written there (npm run e2e:openstack).
 * SPCD_E2E_OPENSTACK_CONTROL=external: spcd runs the compute set only, against a
 * control plane already answering on the set's loopback ports (for working on
 * the compute side alone; docs/explanation/openstack-proof.md).
 *
 * The run's state, set-up, step checks and tear-down are in
 * test/e2e/openstack-e2e-run.ts; this file is the list of checked steps.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_11 } from '../e2e/libvirt-e2e-harness.js';
import { CONTROL_SET, OPENSTACK_IMAGE, OPENSTACK_NEXT_IMAGE } from '../e2e/openstack-e2e-harness.js';
import { pingReport, reportLines, VM_IPS, waitReplyAfter } from '../e2e/openstack-ping.js';
import * as cs from '../e2e/openstack-control-steps.js';
import { pingProcesses } from '../e2e/ns-ping.js';
import { amongDeletes, portRevisions, waitPortsSetUpAgain } from '../e2e/openstack-vm-net.js';
import { OpenStackE2eRun, type NetworkChoice } from '../e2e/openstack-e2e-run.js';
import { ovsControl, ovsStepCount, ovsSteps } from '../e2e/openstack-ovs-steps.js';
import { adoptSteps } from '../e2e/openstack-adopt-steps.js';
import { ovnStepCount, ovnSteps } from '../e2e/openstack-ovn-steps.js';
import { controlDefault, FULL_STEPS } from '../e2e/openstack-lanes.js';
import { DOCKERD_STEP } from '../e2e/openstack-summary.js';
import { rabbitOutage, type OutageResult } from '../e2e/openstack-outage-steps.js';
import { DaemonConfig, dockerdRestart, type DockerdResult } from '../e2e/openstack-dockerd-steps.js';
import { novaManages, type Acted } from '../e2e/openstack-steps.js';
import { REPO } from '../support/daemon.js';

/**
 * Steps 6 and 7 (the Linux bridge agent's upgrade, and SIGKILL during it)
 * run in a full run (SPCD_E2E_STEPS=full, test/e2e/openstack-lanes.ts)
 * unless SPCD_E2E_LB_AGENT_STEPS=0. The image's ebtables-nft (1.8.9)
 * cannot delete the agent's own `--among-src` rule by its specification on
 * this kernel; the test's OpenStack image gives the agent an ebtables wrapper
 * that deletes it by number (templates/neutron/ebtables-among-delete.j2,
 * docs/explanation/openstack-network.md "The agent's MAC rules on ebtables-nft 1.8.9").
 * Without it a restarted agent retries for ever and its ports stay BUILD.
 */
const LB_AGENT_STEPS = FULL_STEPS && process.env.SPCD_E2E_LB_AGENT_STEPS !== '0';
const EXTERNAL_CONTROL = process.env.SPCD_E2E_OPENSTACK_CONTROL === 'external';
/** The control and network sets' containers, and step 9's set. */
const { control: CONTROL, compute: COMPUTE } = cs.stepMembers(EXTERNAL_CONTROL);
/** Step 8's containers: every control container in a full run, else the three the ports depend on (openstack-lanes.ts). */
const LB_CONTROL = FULL_STEPS ? CONTROL : controlDefault(CONTROL);
/** Step 10 (RabbitMQ down for a minute) needs the control plane's RabbitMQ. */
const RABBIT_OUTAGE = !EXTERNAL_CONTROL;
/**
 * Steps 11 and 12 restart the host's dockerd: with a control plane outside
 * spcd on the same engine they would take it down too, so they run only
 * with the test's own control set, and not with SPCD_E2E_DOCKERD_STEPS=0.
 */
const DOCKERD_STEPS = !EXTERNAL_CONTROL && process.env.SPCD_E2E_DOCKERD_STEPS !== '0';
/**
 * Step 12 (live-restore off) runs unless SPCD_E2E_DOCKERD_OFF=0: every
 * container comes back under spcd; the test's neutron-server, restarted with
 * everything else, lists networks once before Nova's view is checked
 * (settleFor, as in step 8; docs/explanation/openstack-proof.md).
 */
const DOCKERD_OFF = DOCKERD_STEPS && process.env.SPCD_E2E_DOCKERD_OFF !== '0';
const STEPS =
  (LB_AGENT_STEPS ? 7 : 5) +
  LB_CONTROL.length +
  1 +
  (RABBIT_OUTAGE ? 1 : 0) +
  (DOCKERD_STEPS ? 1 : 0) +
  (DOCKERD_OFF ? 1 : 0);
const VMS = 2;
/**
 * The network variants (SPCD_E2E_NETWORK): `all` (the default) runs the
 * Linux bridge variant's steps, then switches the compute host to the
 * shipped Open vSwitch set on the same control plane and runs its steps
 * (test/e2e/openstack-ovs-steps.ts), then rebuilds the host with
 * kolla-ansible's module and adopts it (test/e2e/openstack-adopt-steps.ts);
 * `lb`, `ovs` or `adopt` runs one. `ovn` is a run of its own, not in `all`:
 * its control plane runs neutron-server on ML2/OVN and OVN's central
 * services from the start, with the shipped OVN compute set
 * (test/e2e/openstack-ovn-steps.ts; npm run e2e:openstack runs it after `all`).
 */
const NETWORK = (process.env.SPCD_E2E_NETWORK ?? 'all') as NetworkChoice;
if (!['all', 'lb', 'ovs', 'adopt', 'ovn'].includes(NETWORK))
  throw new Error(`SPCD_E2E_NETWORK=${NETWORK}: expected all, lb, ovs, adopt or ovn`);
const OVS_CONTROL = ovsControl(CONTROL);
const SPCD_ARGS = ['--templates', join(REPO, 'templates'), '--gate-deadline', '600s'];
const T0 = Date.now();
/**
 * The proof needs Nova's control services (nova-api, conductor, scheduler,
 * Glance, Neutron's API) in the control set; until the set has a nova-api
 * the test says so and skips instead of waiting out its deadline.
 */
const CONTROL_READY = EXTERNAL_CONTROL || /\bnova[-_]api\b/.test(readFileSync(CONTROL_SET, 'utf8'));
if (!CONTROL_READY)
  console.log(
    `openstack-e2e skipped: ${CONTROL_SET} has no nova-api yet (docs/explanation/openstack-proof.md)`,
  );
const e2e = new OpenStackE2eRun({
  externalControl: EXTERNAL_CONTROL,
  spcdArgs: SPCD_ARGS,
  steps: STEPS,
  vms: VMS,
  t0: T0,
  network: NETWORK,
  ovsSteps: ovsStepCount(OVS_CONTROL),
  ovnSteps: ovnStepCount(),
});
const { name, ctl, actions } = e2e;
const { vms, windows, pingSources } = e2e.lb;
const { upgrade, restart, killMidUpgrade } = actions;

beforeAll(async () => {
  if (!CONTROL_READY) return;
  await e2e.setUp();
}, 60 * 60_000);

afterAll(async () => {
  if (!CONTROL_READY) return;
  await e2e.tearDown();
}, 600_000);

describe.runIf(CONTROL_READY && (NETWORK === 'all' || NETWORK === 'lb'))(
  'Nova VMs survive spcd upgrading everything under them, and Nova still manages them',
  () => {
    /** One step: after it, every VM survived and the network is whole. */
    const step = async (label: string, act: () => Promise<Acted>): Promise<void> => {
      const r = await e2e.step(label, act);
      expect(r.failures, r.failures.join('; ')).toEqual([]);
      expect(r.vmsOk).toBe(VMS);
    };

    /**
     * A step that starts a new Linux bridge agent: it ends once the new agent
     * set every port up again, then prints the rules the agent's ebtables
     * wrapper deleted by number (each port's old MAC rule, after the new one
     * was in; templates/neutron/ebtables-among-delete.j2).
     */
    const lbAgentStep = async (label: string, act: () => Promise<Acted>): Promise<void> => {
      const { openstack: os } = e2e;
      const { made } = e2e.lb;
      try {
        // Inside the step (its ping window): the new agent sets every port
        // up again, which is when it replaces each port's MAC rule.
        await step(label, async () => {
          const before = await portRevisions(os, made.network!);
          const a = await act();
          const s = await waitPortsSetUpAgain(os, made.network!, before, 300_000);
          console.log(`${label} ports_set_up_again_after_s=${s.toFixed(1)} (after spcd's action)`);
          return a;
        });
      } finally {
        const lines = await amongDeletes(name('neutron_linuxbridge_agent')).catch((e: Error) => [
          `(unread: ${e.message})`,
        ]);
        console.log(`${label} ebtables_among_deleted_by_number=${lines.length}\n  ${lines.join('\n  ')}`);
      }
    };

    it(
      '1: upgrade nova_libvirt bookworm -> trixie (libvirt 9.0 -> 11.3)',
      () => step('libvirt-upgrade-9-to-11', () => upgrade(name('nova_libvirt'), IMAGE_11)),
      1_200_000,
    );
    it(
      '2: upgrade nova_compute to a new image',
      () => step('compute-upgrade', () => upgrade(name('nova_compute'), OPENSTACK_NEXT_IMAGE)),
      1_200_000,
    );
    it(
      '3: restart nova_libvirt',
      () => step('libvirt-restart', () => restart(name('nova_libvirt'))),
      1_200_000,
    );
    it(
      '4: restart nova_compute',
      () => step('compute-restart', () => restart(name('nova_compute'))),
      1_200_000,
    );
    it(
      '5: SIGKILL spcd mid nova_compute upgrade, start it again',
      () => step('compute-upgrade-spcd-killed', () => killMidUpgrade(name('nova_compute'), OPENSTACK_IMAGE)),
      1_200_000,
    );

    it.runIf(LB_AGENT_STEPS)(
      '6: upgrade the Linux bridge agent to a new image',
      () =>
        lbAgentStep('lb-agent-upgrade', () =>
          upgrade(name('neutron_linuxbridge_agent'), OPENSTACK_NEXT_IMAGE),
        ),
      1_200_000,
    );
    it.runIf(LB_AGENT_STEPS)(
      '7: SIGKILL spcd mid Linux bridge agent upgrade, start it again',
      () =>
        lbAgentStep('lb-agent-upgrade-spcd-killed', () =>
          killMidUpgrade(name('neutron_linuxbridge_agent'), OPENSTACK_IMAGE),
        ),
      1_200_000,
    );
    it.runIf(LB_CONTROL.length > 0)(
      '8: restart each control container, each until spcd reports it healthy',
      async () => {
        for (const c of LB_CONTROL)
          await step(`control-restart-${c}`, () =>
            cs.restartControl(ctl, actions, e2e.openstack, name(c), c),
          );
      },
      LB_CONTROL.length * 1_200_000,
    );
    it('9: upgrade the whole compute set, every member to its image plus one label', async () => {
      const images = await cs.setTargets(ctl, COMPUTE.containers.map(name), 'set');
      await step('compute-set-upgrade', () => cs.upgradeSet(ctl, COMPUTE.set, images));
    }, 2_400_000);

    it.runIf(RABBIT_OUTAGE)(
      '10: RabbitMQ down for a minute: spcd reports it on every AMQP client and restarts nothing',
      async () => {
        const dependents = ['nova_compute', 'neutron_linuxbridge_agent', 'nova_conductor', 'nova_scheduler'];
        let outage: OutageResult | undefined;
        await step('rabbitmq-outage', async () => {
          outage = await rabbitOutage(ctl, name('rabbitmq'), dependents.map(name));
          return outage;
        });
        const compute = new Set(COMPUTE.containers.map(name));
        e2e.rabbitOutageRestarts = outage!.restarted.length;
        expect(outage!.restarted.filter((c) => compute.has(c))).toEqual([]);
        expect(outage!.restarted, 'a container was restarted during the outage').toEqual([]);
      },
      1_200_000,
    );

    describe.runIf(DOCKERD_STEPS)('dockerd restarted under everything, as a package upgrade does', () => {
      const engine = new DaemonConfig();
      afterAll(() => engine.restore(), 120_000);
      /** One engine restart; `live`: live-restore on or off. */
      const dockerdStep = async (live: boolean): Promise<DockerdResult> => {
        let r: DockerdResult | undefined;
        await engine.liveRestore(live);
        await step(`${DOCKERD_STEP}-live-restore-${live ? 'on' : 'off'}`, async () => {
          r = await dockerdRestart(
            ctl,
            `spcd-e2e-probe-${e2e.sb!.instance}`,
            cs.settleFor('neutron_server', e2e.openstack),
          );
          return r;
        });
        expect(r!.liveRestore).toBe(live);
        expect(r!.notBack, 'containers spcd did not bring back').toEqual([]);
        return r!;
      };
      it('11: with live-restore on nothing restarts and spcd begins no operation', async () => {
        const r = await dockerdStep(true);
        expect(r.restarted, 'containers restarted through a live-restore engine restart').toEqual([]);
        expect(r.operations, 'operations spcd began').toEqual([]);
      }, 1_200_000);
      it.runIf(DOCKERD_OFF)(
        '12: with live-restore off spcd starts every container dockerd stopped',
        async () => {
          const r = await dockerdStep(false);
          // dockerd stopped every container on its way down: each has a new start, under spcd.
          expect(r.restarted.length, `containers with a new start time: ${r.restarted.join(', ')}`).toBe(
            r.running,
          );
        },
        1_800_000,
      );
    });

    it('not one VM packet lost through the steps, each direction counted in its guest and from the DHCP namespace', async () => {
      // Every loss before the last step's end is on the consoles once a reply after it came.
      const end = windows.at(-1)?.to ?? Date.now() / 1000;
      await waitReplyAfter(pingSources(), end, 60_000);
      const ns = e2e.lb.nsPing!;
      await ns.waitReplyAfter(end, 60_000);
      const nsStop = await ns.stop();
      const ping = pingReport(pingSources(), windows, ns.directions(windows));
      e2e.lb.ping = ping;
      for (const l of reportLines(ping)) console.log(l);
      expect(ping.restarts, 'a pinger started its sequence again (the guest restarted it)').toBe(0);
      expect(ping.sent).toBeGreaterThan(0);
      expect(ping.lost, ping.summary).toBe(0);
      expect(ping.nsSent).toBeGreaterThan(0);
      expect(ping.nsLost, ping.summary).toBe(0);
      expect(nsStop.left, 'a namespace pinger outlived its stop').toEqual([]);
      expect(pingProcesses(VM_IPS)).toEqual([]);
    }, 180_000);

    it('Nova still manages them: stops and starts one VM, deletes the other', async () => {
      await novaManages(e2e.openstack, join(e2e.root, 'libvirt'), vms);
      e2e.managed = 1;
    }, 1_200_000);
  },
);

if (CONTROL_READY && (NETWORK === 'all' || NETWORK === 'ovs'))
  ovsSteps(e2e, { switchFirst: NETWORK === 'all', control: OVS_CONTROL });
if (CONTROL_READY && (NETWORK === 'all' || NETWORK === 'adopt')) adoptSteps(e2e);
if (CONTROL_READY && NETWORK === 'ovn') ovnSteps(e2e);
