/**
 * A real OpenStack compute node under spcd (issue #12 part 4,
 * docs/openstack-e2e.md): one spcd runs the control set and the compute set
 * (container-sets-e2e/openstack/). The test uploads the tiny guest to Glance
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
 *   (SPCD_E2E_LB_AGENT_STEPS=0 leaves 6 and 7 out, see LB_AGENT_STEPS);
 *   8. restarts each control container, one window each, until spcd reports it healthy;
 *   9. upgrades the whole compute set (openstack-control-steps.ts).
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
 * the compute side alone; docs/openstack-e2e.md).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventTap, IMAGE_11, run, SpcdApi, vmsh } from '../e2e/libvirt-e2e-harness.js';
import { OpenStack } from '../e2e/openstack-client.js';
import {
  buildAll,
  COMPUTE_SET,
  CONTROL_SET,
  ConsoleWatch,
  NETWORK_SET,
  OPENSTACK_IMAGE,
  OPENSTACK_NEXT_IMAGE,
  prepareRoot,
  qemuOf,
  renderSetFile,
} from '../e2e/openstack-e2e-harness.js';
import {
  hostNetworkDown,
  hostNetworkLeft,
  hostNetworkUp,
  NET_CIDR,
  PHYSNET,
  type HostNet,
} from '../e2e/openstack-network.js';
import {
  DHCP_POOL,
  GUEST_CMDLINE,
  pingReport,
  reportLines,
  VM_IPS,
  waitPinging,
  waitReplyAfter,
  type PingReport,
  type PingSource,
} from '../e2e/openstack-ping.js';
import {
  amongDeletes,
  bootActive,
  deleteNetwork,
  networkCheck as checkNetwork,
  networkSettled,
  portRevisions,
  uploadGuest,
  waitPortsSetUpAgain,
} from '../e2e/openstack-vm-net.js';
import { SpcdActions, type SpcdControl } from '../e2e/openstack-actions.js';
import * as cs from '../e2e/openstack-control-steps.js';
import { NetnsPing } from '../e2e/openstack-ns-ping.js';
import { pingProcesses } from '../e2e/ns-ping.js';
import type { PingWindow } from '../e2e/ping-log.js';
import {
  computeUpSince,
  consoleLog,
  runStep,
  waitQemu,
  type Acted,
  type StepResult,
  type Vm,
} from '../e2e/openstack-steps.js';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Steps 6 and 7 (the Linux bridge agent's upgrade, and SIGKILL during it)
 * run unless SPCD_E2E_LB_AGENT_STEPS=0. The image's ebtables-nft (1.8.9)
 * cannot delete the agent's own `--among-src` rule by its specification on
 * this kernel; the test's compute set gives the agent an ebtables wrapper
 * that deletes it by number (templates/neutron/ebtables-among-delete.j2,
 * docs/openstack-e2e.md "The agent's MAC rules on ebtables-nft 1.8.9").
 * Without it a restarted agent retries for ever and its ports stay BUILD.
 */
const LB_AGENT_STEPS = process.env.SPCD_E2E_LB_AGENT_STEPS !== '0';
const EXTERNAL_CONTROL = process.env.SPCD_E2E_OPENSTACK_CONTROL === 'external';
/** Step 8's containers (all of the control and network sets) and step 9's set. */
const { control: CONTROL, compute: COMPUTE } = cs.stepMembers(EXTERNAL_CONTROL);
const STEPS = (LB_AGENT_STEPS ? 7 : 5) + CONTROL.length + 1;
const VMS = 2;
const SPCD_ARGS = ['--templates', join(REPO, 'templates'), '--gate-deadline', '600s'];
const T0 = Date.now();
/**
 * The proof needs Nova's control services (nova-api, conductor, scheduler,
 * Glance, Neutron's API) in the control set; until the set has a nova-api
 * the test says so and skips instead of waiting out its deadline.
 */
const CONTROL_READY = EXTERNAL_CONTROL || /\bnova[-_]api\b/.test(readFileSync(CONTROL_SET, 'utf8'));
if (!CONTROL_READY)
  console.log(`openstack-e2e skipped: ${CONTROL_SET} has no nova-api yet (docs/openstack-e2e.md)`);
let sb: Sandbox;
let root = '';
let prefix = '';
let spcd: SpcdProcess | undefined;
let tap: EventTap | undefined;
let api: SpcdApi;
let os: OpenStack;
const vms: Vm[] = [];
/** Glance images, the flavor, the network and the VMs' ports this run made, removed at the end. */
const made: { images: string[]; flavor?: string; network?: string; ports: string[] } = {
  images: [],
  ports: [],
};
/** The host's side of the network (the physnet's veth, namespaces folder, chains before the run). */
let hostNet: HostNet | undefined;
/** Every Neutron port the run saw (VMs' and DHCP's): their taps are removed at the end. */
const portIds = new Set<string>();
/** Steps after which the network check found nothing wrong. */
let networkOk = 0;
const results: StepResult[] = [];
let managed = 0;
/** One window of host time (epoch s) per step: the ping losses are placed in them. */
const windows: PingWindow[] = [];
let ping: PingReport | undefined;
/** Both VMs pinged from the DHCP agent's qdhcp namespace, from the start of the steps to the ping test. */
let nsPing: NetnsPing | undefined;
/** Each VM's direction: its stamped console, pinging the other VM's address. */
const pingSources = (): PingSource[] =>
  vms.map((v, i) => ({ from: v.domain, peer: VM_IPS[1 - i]!, text: () => v.console.pingText() }));
const networkCheck = (): ReturnType<typeof checkNetwork> =>
  checkNetwork({
    os,
    network: made.network!,
    hostNet: hostNet!,
    serverIds: vms.map((v) => v.id),
    vms: VMS,
    dhcpAgent: name('neutron_dhcp_agent'),
    portIds,
  });
const name = (svc: string): string => `${prefix}${svc}`;

async function startSpcd(env: NodeJS.ProcessEnv = {}): Promise<void> {
  const p = SpcdProcess.start(sb, SPCD_ARGS, env);
  spcd = p;
  await p.readyOrExit(300_000);
  tap = await EventTap.open(sb.socket);
}

const ctl: SpcdControl = {
  api: () => api,
  tap: () => tap!,
  spcd: () => spcd!,
  startSpcd,
  libvirt: () => name('nova_libvirt'),
};
const actions = new SpcdActions(ctl);
const { upgrade, restart, killMidUpgrade } = actions;

beforeAll(async () => {
  if (!CONTROL_READY) return;
  const build = await buildAll();
  console.log(
    `images: openstack ${build.openstackSeconds.toFixed(1)} s, next ${build.nextSeconds.toFixed(1)} s, libvirt ${build.imagesSeconds.toFixed(1)} s, guest ${build.guestSeconds.toFixed(1)} s\n${build.lines.join('\n')}`,
  );
  sb = sandbox('ose');
  root = join(sb.root, 'host');
  prefix = `ose${process.pid}_`;
  prepareRoot(root);
  // Linux caps interface names at 15 characters: spcdn/spcdp + at most 7 digits.
  const iface = `spcdn${process.pid % 10_000_000}`;
  hostNet = await hostNetworkUp(root, iface, `spcdp${process.pid % 10_000_000}`);
  const r = { root, prefix, runId: sb.instance, iface };
  if (!EXTERNAL_CONTROL) {
    writeSet(sb, 'control.yaml', renderSetFile(CONTROL_SET, r));
    writeSet(sb, 'network.yaml', renderSetFile(NETWORK_SET, r));
  }
  writeSet(sb, 'compute.yaml', renderSetFile(COMPUTE_SET, r));
  const tStart = Date.now();
  await startSpcd();
  api = new SpcdApi(sb.socket);
  os = new OpenStack({
    authUrl: 'http://127.0.0.1:15000/v3',
    username: 'admin',
    password: 'e2e-admin',
    project: 'admin',
  });
  const tUp = Date.now();
  const came = await waitFor(
    'nova-compute up in Nova (control and compute sets bootstrapped)',
    async () => {
      // A failed bootstrap task ends the wait at once (waitFor retries a throw).
      if (spcd?.logged('BOOTSTRAP_FAILED')) return 'bootstrap-failed';
      return (await computeUpSince(os, tStart)) && 'up';
    },
    { timeoutMs: 1_200_000, intervalMs: 5000 },
  ).catch((e: Error) => {
    throw new Error(`${e.message}\nspcd said:\n${spcd?.output.slice(-30).join('\n') ?? ''}`);
  });
  if (came === 'bootstrap-failed')
    throw new Error(
      `a bootstrap task failed:\n${spcd!.output.filter((l) => l.includes('BOOTSTRAP_FAILED')).join('\n')}`,
    );
  console.log(`control and compute up in ${((Date.now() - tUp) / 1000).toFixed(1)} s`);
  // neutron-server starts after its own bootstrap tasks; Nova's server views need it.
  await waitFor('Neutron listing networks', () => os.warmNeutron().then(() => true), {
    timeoutMs: 900_000,
    intervalMs: 3000,
  });
  const image = await uploadGuest(os, sb.instance, join(sb.root, 'root.img'), GUEST_CMDLINE, made.images);
  const flavor = await os.createFlavor(`${sb.instance}-128`, 128, 1, 1);
  made.flavor = flavor;
  const tAgents = Date.now();
  const agents = await waitFor(
    'the Linux bridge and DHCP agents alive in Neutron',
    async () => {
      const a = await os.agents();
      const lb = a.find((x) => x.binary === 'neutron-linuxbridge-agent' && x.alive);
      const dhcp = a.find((x) => x.binary === 'neutron-dhcp-agent' && x.alive);
      return lb && dhcp && a;
    },
    { timeoutMs: 600_000, intervalMs: 3000 },
  );
  console.log(
    `agents alive ${((Date.now() - tAgents) / 1000).toFixed(1)} s after Nova's compute: ${agents.map((a) => `${a.binary}@${a.host}`).join(' ')}`,
  );
  const net = await os.createNetwork(`${sb.instance}-net`, 'flat', PHYSNET, NET_CIDR, DHCP_POOL);
  made.network = net.network;
  for (const [i, ip] of VM_IPS.entries())
    made.ports.push(await os.createPort(`${sb.instance}-vm-${i + 1}`, net.network, net.subnet, ip));
  const tBoot = Date.now();
  const ids: string[] = [];
  for (const [i, port] of made.ports.entries())
    ids.push(await bootActive(os, `${sb.instance}-vm-${i + 1}`, image, flavor, port));
  for (const id of ids) {
    const s = (await os.server(id))!;
    const domain = s['OS-EXT-SRV-ATTR:instance_name']!;
    const qemu = await waitQemu(join(root, 'libvirt'), domain);
    const console_ = new ConsoleWatch(consoleLog(join(root, 'nova/instances'), id));
    vms.push({ id, domain, qemu, console: console_ });
  }
  for (const vm of vms)
    await waitFor(`${vm.domain}'s console counter`, () => vm.console.last() >= 3, {
      timeoutMs: 300_000,
      intervalMs: 500,
    });
  console.log(
    `two VMs ACTIVE with their counters in ${((Date.now() - tBoot) / 1000).toFixed(1)} s: ${vms.map((v) => `${v.domain}=${v.qemu.pid}`).join(' ')}`,
  );
  const plugged = await networkSettled(networkCheck);
  if (plugged.failures.length)
    throw new Error(`the VM and DHCP ports not ACTIVE on the bridge: ${plugged.failures.join('; ')}`);
  console.log(`network: ${plugged.line}`);
  const tPing = Date.now();
  await waitPinging(pingSources(), 300_000);
  console.log(
    `both guests ping each other ${((Date.now() - tPing) / 1000).toFixed(1)} s after the ports were up`,
  );
  await run('bash', [join(REPO, 'scripts/ensure-ping.sh')], 5 * 60_000);
  const tNs = Date.now();
  nsPing = await NetnsPing.start({
    os,
    netnsDir: hostNet.netnsDir,
    network: made.network,
    ports: made.ports,
    ips: VM_IPS,
    cidr: NET_CIDR,
    timeoutMs: 120_000,
  });
  console.log(
    `${nsPing.namespace} pings both VMs ${((Date.now() - tNs) / 1000).toFixed(1)} s after its start`,
  );
  await vmsh('api-probe', [join(root, 'libvirt'), IMAGE_11, sb.instance]);
}, 60 * 60_000);

afterAll(async () => {
  if (!CONTROL_READY) return;
  for (const vm of vms) vm.console.stop();
  // A run that failed before the ping test still shows what the pings saw
  // (the summary line keeps vm_ping_lost=nan: the count was not closed).
  if (!ping && windows.length)
    try {
      const r = pingReport(pingSources(), windows, nsPing?.directions(windows));
      for (const l of reportLines(r)) console.log(`(unclosed) ${l}`);
    } catch (e) {
      console.log(`ping report: ${(e as Error).message}`);
    }
  // Before the network goes: its namespace goes with it.
  if (nsPing) console.log(`ns pingers stopped: ${JSON.stringify(await nsPing.stop())}`);
  // Nova removes what it can; the rest goes by PID and by id.
  if (os) {
    for (const vm of vms) await os.deleteServer(vm.id).catch(() => undefined);
    for (const id of made.images) await os.deleteImage(id).catch(() => undefined);
    if (made.flavor) await os.request('compute', 'DELETE', `/flavors/${made.flavor}`).catch(() => undefined);
    if (made.network) await deleteNetwork(os, made.network, made.ports, hostNet);
  }
  tap?.close();
  await spcd?.stop();
  if (sb) {
    for (const vm of vms) {
      const c = await vmsh('cleanup', [join(root, 'libvirt'), vm.domain, sb.instance, vm.qemu.pid]).catch(
        (e: Error) => ({ error: e.message }),
      );
      console.log(`cleanup ${vm.domain}: ${JSON.stringify(c)}`);
    }
    await cleanupInstance(sb.instance);
    // After the containers are gone: a Linux bridge agent still running (spcd
    // leaves containers running when it stops) would put its chains back.
    if (hostNet) {
      const ids = { ports: [...portIds], networks: made.network ? [made.network] : [] };
      const removed = await hostNetworkDown(hostNet, ids).catch((e: Error) => [`error: ${e.message}`]);
      const left = await hostNetworkLeft(hostNet, ids);
      console.log(`network cleanup removed: ${removed.join(', ') || 'nothing'}; left: ${left.length}`);
    }
    const left = await run(
      '/usr/bin/docker',
      ['ps', '-aq', '--filter', `label=spcd-e2e.run=${sb.instance}`],
      60_000,
    );
    rmSync(sb.root, { recursive: true, force: true });
    console.log(`leftover containers: ${left.stdout.trim().split('\n').filter(Boolean).length}`);
  }
  const vmSteps = results.reduce((n, r) => n + r.vmsOk, 0);
  const lib = results.map((r) => r.libvirtBackS).filter((x) => Number.isFinite(x));
  const up = results.map((r) => r.computeUpS).filter((x) => Number.isFinite(x));
  const census = results.reduce((n, r) => n + r.censusMismatches, 0);
  console.log(`openstack_e2e_total_s=${((Date.now() - T0) / 1000).toFixed(1)}`);
  const summary =
    `openstack_vms_survived=${vmSteps}/${STEPS * VMS} nova_managed_after=${managed} census_mismatches=${census} ` +
    `max_libvirt_window_s=${lib.length ? Math.max(...lib).toFixed(2) : 'nan'} max_compute_up_s=${up.length ? Math.max(...up).toFixed(1) : 'nan'} network_ok=${networkOk}/${STEPS} ` +
    (ping?.summary ?? 'vm_ping_sent=0 vm_ping_lost=nan max_ping_gap_ms=nan ns_ping_sent=0 ns_ping_lost=nan');
  console.log(summary);
  if (process.env.SPCD_E2E_SUMMARY) writeFileSync(process.env.SPCD_E2E_SUMMARY, `${summary}\n`);
}, 600_000);

describe.runIf(CONTROL_READY)(
  'Nova VMs survive spcd upgrading everything under them, and Nova still manages them',
  () => {
    const step = async (label: string, act: () => Promise<Acted>): Promise<void> => {
      const from = Date.now() / 1000;
      const r = await runStep(
        {
          os,
          api,
          tap: () => tap!,
          libvirtRoot: join(root, 'libvirt'),
          libvirt: name('nova_libvirt'),
          vms,
          deadlineMs: 600_000,
        },
        label,
        act,
      );
      // The network after the step (ports ACTIVE, taps on the bridge, dnsmasq's hosts), with a deadline.
      const net = await networkSettled(networkCheck);
      r.failures.push(...net.failures.map((f) => `network: ${f}`));
      if (!net.failures.length) networkOk++;
      console.log(`${label} network: ok_after_s=${net.afterS.toFixed(1)} ${net.line}`);
      windows.push({ name: label, from, to: Date.now() / 1000 });
      results.push(r);
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
    it.runIf(CONTROL.length > 0)(
      '8: restart each control container, each until spcd reports it healthy',
      async () => {
        for (const c of CONTROL)
          await step(`control-restart-${c}`, () => cs.restartControl(ctl, actions, os, name(c), c));
      },
      CONTROL.length * 1_200_000,
    );
    it('9: upgrade the whole compute set, every member to its image plus one label', async () => {
      const images = await cs.setTargets(ctl, COMPUTE.containers.map(name), 'set');
      await step('compute-set-upgrade', () => cs.upgradeSet(ctl, COMPUTE.set, images));
    }, 2_400_000);

    it('not one VM packet lost through the steps, each direction counted in its guest and from the DHCP namespace', async () => {
      // Every loss before the last step's end is on the consoles once a reply after it came.
      const end = windows.at(-1)?.to ?? Date.now() / 1000;
      await waitReplyAfter(pingSources(), end, 60_000);
      await nsPing!.waitReplyAfter(end, 60_000);
      const nsStop = await nsPing!.stop();
      ping = pingReport(pingSources(), windows, nsPing!.directions(windows));
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
      const [a, b] = vms;
      await os.action(a!.id, 'os-stop');
      await waitFor('VM 1 SHUTOFF', async () => (await os.server(a!.id))?.status === 'SHUTOFF', {
        timeoutMs: 300_000,
        intervalMs: 1000,
      });
      expect(qemuOf(join(root, 'libvirt'), a!.domain)).toBeUndefined();
      await os.action(a!.id, 'os-start');
      await waitFor('VM 1 ACTIVE again', async () => (await os.server(a!.id))?.status === 'ACTIVE', {
        timeoutMs: 300_000,
        intervalMs: 1000,
      });
      const q = await waitQemu(join(root, 'libvirt'), a!.domain);
      expect(q.pid).not.toBe(a!.qemu.pid);
      // A new boot: the counter starts again from 0 in the new console.log.
      const fresh = new ConsoleWatch(a!.console.file);
      await waitFor('VM 1 counting again', () => fresh.ticks.some((t) => t.n >= 2), {
        timeoutMs: 300_000,
        intervalMs: 500,
      }).finally(() => fresh.stop());
      await os.deleteServer(b!.id);
      await waitFor('VM 2 gone from Nova', async () => (await os.server(b!.id)) === undefined, {
        timeoutMs: 300_000,
        intervalMs: 1000,
      });
      await waitFor('VM 2 qemu gone', () => qemuOf(join(root, 'libvirt'), b!.domain) === undefined, {
        timeoutMs: 60_000,
        intervalMs: 500,
      });
      managed = 1;
    }, 1_200_000);
  },
);
