/**
 * The state of one OpenStack end-to-end run (test/integration/openstack-e2e.test.ts)
 * and what happens around its checked steps: `setUp` (images, spcd with the
 * control, network and compute sets, Nova up, the guest in Glance, the flat
 * network, two VMs booted and pinging each other, the DHCP namespace's pingers),
 * `step` (one change through spcd, then the survival and network checks, its
 * ping window recorded), `tearDown` (everything the run made removed, the
 * summary line printed and written to SPCD_E2E_SUMMARY).
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventTap, IMAGE_11, run, SpcdApi, vmsh } from './libvirt-e2e-harness.js';
import { OpenStack } from './openstack-client.js';
import {
  buildAll,
  computeHost,
  computeHostDown,
  logTail,
  COMPUTE_SET,
  CONTROL_SET,
  ConsoleWatch,
  NETWORK_SET,
  prepareRoot,
  renderSetFile,
  volumeDir,
} from './openstack-e2e-harness.js';
import { setMembers } from './openstack-control-steps.js';
import {
  hostNetworkDown,
  hostNetworkLeft,
  hostNetworkUp,
  NET_CIDR,
  PHYSNET,
  type HostNet,
} from './openstack-network.js';
import {
  DHCP_POOL,
  GUEST_CMDLINE,
  pingReport,
  reportLines,
  VM_IPS,
  waitPinging,
  type PingReport,
  type PingSource,
} from './openstack-ping.js';
import {
  bootActive,
  deleteNetwork,
  networkCheck as checkNetwork,
  networkSettled,
  uploadGuest,
} from './openstack-vm-net.js';
import { SpcdActions, type SpcdControl } from './openstack-actions.js';
import { NetnsPing } from './openstack-ns-ping.js';
import { summaryLine } from './openstack-summary.js';
import type { PingWindow } from './ping-log.js';
import {
  computeUpSince,
  consoleLog,
  runStep,
  waitQemu,
  type Acted,
  type StepResult,
  type Vm,
} from './openstack-steps.js';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

export interface OpenStackE2eOptions {
  /** spcd runs the compute set only, against a control plane already answering. */
  readonly externalControl: boolean;
  /** spcd's command-line arguments. */
  readonly spcdArgs: string[];
  /** Checked steps the summary counts (each VM's survival and the network after each). */
  readonly steps: number;
  readonly vms: number;
  /** When the run began (Date.now()), for openstack_e2e_total_s. */
  readonly t0: number;
}

export class OpenStackE2eRun {
  sb: Sandbox | undefined;
  root = '';
  prefix = '';
  spcd: SpcdProcess | undefined;
  tap: EventTap | undefined;
  api!: SpcdApi;
  os: OpenStack | undefined;
  readonly vms: Vm[] = [];
  /** Glance images, the flavor, the network and the VMs' ports this run made, removed at the end. */
  readonly made: { images: string[]; flavor?: string; network?: string; ports: string[] } = {
    images: [],
    ports: [],
  };
  /** The host's side of the network (the physnet's veth, namespaces folder, chains before the run). */
  hostNet: HostNet | undefined;
  /** Every Neutron port the run saw (VMs' and DHCP's): their taps are removed at the end. */
  readonly portIds = new Set<string>();
  /** Steps after which the network check found nothing wrong. */
  networkOk = 0;
  readonly results: StepResult[] = [];
  /** 1 once Nova stopped, started and deleted the VMs. */
  managed = 0;
  /** Containers restarted during the RabbitMQ outage step (undefined: the step did not run). */
  rabbitOutageRestarts: number | undefined;
  /** One window of host time (epoch s) per step: the ping losses are placed in them. */
  readonly windows: PingWindow[] = [];
  ping: PingReport | undefined;
  /** Both VMs pinged from the DHCP agent's qdhcp namespace, from the start of the steps to the ping test. */
  nsPing: NetnsPing | undefined;
  readonly ctl: SpcdControl;
  readonly actions: SpcdActions;

  constructor(private readonly o: OpenStackE2eOptions) {
    this.ctl = {
      api: () => this.api,
      tap: () => this.tap!,
      spcd: () => this.spcd!,
      startSpcd: this.startSpcd,
      libvirt: () => this.name('nova_libvirt'),
    };
    this.actions = new SpcdActions(this.ctl);
  }

  /** The OpenStack client (set up by `setUp`). */
  get openstack(): OpenStack {
    return this.os!;
  }

  /** The shipped compute set's containers keep their names; the test's own sets get the run's prefix. */
  private readonly computeNames = new Set(setMembers(COMPUTE_SET).containers);
  readonly name = (svc: string): string => (this.computeNames.has(svc) ? svc : `${this.prefix}${svc}`);
  /** 1 when the compute set spcd ran is the shipped file, byte for byte (checked at set-up). */
  shippedSet = 0;
  private hadRunLibvirt = true; // /run/libvirt was there before the run (else the run removes it)

  /** Each VM's direction: its stamped console, pinging the other VM's address. */
  readonly pingSources = (): PingSource[] =>
    this.vms.map((v, i) => ({ from: v.domain, peer: VM_IPS[1 - i]!, text: () => v.console.pingText() }));

  readonly networkCheck = (): ReturnType<typeof checkNetwork> =>
    checkNetwork({
      os: this.os!,
      network: this.made.network!,
      hostNet: this.hostNet!,
      serverIds: this.vms.map((v) => v.id),
      vms: this.o.vms,
      dhcpAgent: this.name('neutron_dhcp_agent'),
      portIds: this.portIds,
    });

  readonly startSpcd = async (env: NodeJS.ProcessEnv = {}): Promise<void> => {
    const host = [
      '--overrides',
      join(this.sb!.root, 'overrides.yaml'),
      '--secrets',
      join(this.sb!.root, 'secrets.yaml'),
    ];
    const p = SpcdProcess.start(this.sb!, [...this.o.spcdArgs, ...host], env);
    this.spcd = p;
    await p.readyOrExit(300_000);
    this.tap = await EventTap.open(this.sb!.socket);
  };

  /**
   * Images, spcd with the sets, Nova's compute up, the guest and flavor, the
   * network, two VMs ACTIVE and pinging each other, and the DHCP namespace
   * pinging both.
   */
  async setUp(): Promise<void> {
    const build = await buildAll();
    console.log(
      `images: openstack ${build.openstackSeconds.toFixed(1)} s, next ${build.nextSeconds.toFixed(1)} s, libvirt ${build.imagesSeconds.toFixed(1)} s, guest ${build.guestSeconds.toFixed(1)} s\n${build.lines.join('\n')}`,
    );
    const sb = sandbox('ose');
    this.sb = sb;
    const root = join(sb.root, 'host');
    this.root = root;
    this.prefix = `ose${process.pid}_`;
    prepareRoot(root);
    // Linux caps interface names at 15 characters: spcdn/spcdp + at most 7 digits.
    const iface = `spcdn${process.pid % 10_000_000}`;
    const hostNet = await hostNetworkUp(root, iface, `spcdp${process.pid % 10_000_000}`);
    this.hostNet = hostNet;
    const r = { root, prefix: this.prefix, runId: sb.instance, iface };
    if (!this.o.externalControl) {
      writeSet(sb, 'control.yaml', renderSetFile(CONTROL_SET, r));
      writeSet(sb, 'network.yaml', renderSetFile(NETWORK_SET, r));
    }
    this.hadRunLibvirt = existsSync('/run/libvirt');
    this.shippedSet = computeHost(sb, r);
    const tStart = Date.now();
    await this.startSpcd();
    this.api = new SpcdApi(sb.socket);
    const os = new OpenStack({
      authUrl: 'http://127.0.0.1:15000/v3',
      username: 'admin',
      password: 'e2e-admin',
      project: 'admin',
    });
    this.os = os;
    const tUp = Date.now();
    const came = await waitFor(
      'nova-compute up in Nova (control and compute sets bootstrapped)',
      async () => {
        // A failed bootstrap task ends the wait at once (waitFor retries a throw).
        if (this.spcd?.logged('BOOTSTRAP_FAILED')) return 'bootstrap-failed';
        return (await computeUpSince(os, tStart)) && 'up';
      },
      { timeoutMs: 1_200_000, intervalMs: 5000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\nspcd said:\n${this.spcd?.output.slice(-30).join('\n') ?? ''}`);
    });
    if (came === 'bootstrap-failed')
      throw new Error(
        `a bootstrap task failed:\n${this.spcd!.output.filter((l) => l.includes('BOOTSTRAP_FAILED')).join('\n')}`,
      );
    console.log(`control and compute up in ${((Date.now() - tUp) / 1000).toFixed(1)} s`);
    // neutron-server starts after its own bootstrap tasks; Nova's server views need it.
    await waitFor('Neutron listing networks', () => os.warmNeutron().then(() => true), {
      timeoutMs: 900_000,
      intervalMs: 3000,
    });
    const made = this.made;
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
      const console_ = new ConsoleWatch(consoleLog(join(volumeDir('nova_compute'), 'instances'), id));
      this.vms.push({ id, domain, qemu, console: console_ });
    }
    for (const vm of this.vms)
      await waitFor(`${vm.domain}'s console counter`, () => vm.console.last() >= 3, {
        timeoutMs: 300_000,
        intervalMs: 500,
      });
    console.log(
      `two VMs ACTIVE with their counters in ${((Date.now() - tBoot) / 1000).toFixed(1)} s: ${this.vms.map((v) => `${v.domain}=${v.qemu.pid}`).join(' ')}`,
    );
    const plugged = await networkSettled(this.networkCheck);
    if (plugged.failures.length)
      throw new Error(`the VM and DHCP ports not ACTIVE on the bridge: ${plugged.failures.join('; ')}`);
    console.log(`network: ${plugged.line}`);
    const tPing = Date.now();
    await waitPinging(this.pingSources(), 300_000);
    console.log(
      `both guests ping each other ${((Date.now() - tPing) / 1000).toFixed(1)} s after the ports were up`,
    );
    await run('bash', [join(REPO, 'scripts/ensure-ping.sh')], 5 * 60_000);
    const tNs = Date.now();
    this.nsPing = await NetnsPing.start({
      os,
      netnsDir: hostNet.netnsDir,
      network: made.network,
      ports: made.ports,
      ips: VM_IPS,
      cidr: NET_CIDR,
      timeoutMs: 120_000,
    });
    console.log(
      `${this.nsPing.namespace} pings both VMs ${((Date.now() - tNs) / 1000).toFixed(1)} s after its start`,
    );
    await vmsh('api-probe', [join(root, 'libvirt'), IMAGE_11, sb.instance]);
  }

  /**
   * One change through spcd (`act`), then the VMs' survival (runStep) and the
   * network after it, with a deadline; its ping window is recorded. The
   * caller checks the result's failures and VMs.
   */
  async step(label: string, act: () => Promise<Acted>): Promise<StepResult> {
    const from = Date.now() / 1000;
    const r = await runStep(
      {
        os: this.os!,
        api: this.api,
        tap: () => this.tap!,
        libvirtRoot: join(this.root, 'libvirt'),
        libvirt: this.name('nova_libvirt'),
        compute: this.name('nova_compute'),
        vms: this.vms,
        deadlineMs: 600_000,
      },
      label,
      act,
    );
    // The network after the step (ports ACTIVE, taps on the bridge, dnsmasq's hosts), with a deadline.
    const net = await networkSettled(this.networkCheck);
    r.failures.push(...net.failures.map((f) => `network: ${f}`));
    if (!net.failures.length) this.networkOk++;
    console.log(`${label} network: ok_after_s=${net.afterS.toFixed(1)} ${net.line}`);
    this.windows.push({ name: label, from, to: Date.now() / 1000 });
    this.results.push(r);
    return r;
  }

  /** Removes everything the run made, then prints (and writes) the summary line. */
  async tearDown(): Promise<void> {
    const { made, vms, hostNet, sb, os } = this;
    for (const vm of vms) vm.console.stop();
    // A run that failed before the ping test still shows what the pings saw
    // (the summary line keeps vm_ping_lost=nan: the count was not closed).
    if (!this.ping && this.windows.length)
      try {
        const r = pingReport(this.pingSources(), this.windows, this.nsPing?.directions(this.windows));
        for (const l of reportLines(r)) console.log(`(unclosed) ${l}`);
      } catch (e) {
        console.log(`ping report: ${(e as Error).message}`);
      }
    // Before the network goes: its namespace goes with it.
    if (this.nsPing) console.log(`ns pingers stopped: ${JSON.stringify(await this.nsPing.stop())}`);
    // Nova removes what it can; the rest goes by PID and by id.
    if (os) {
      for (const vm of vms) await os.deleteServer(vm.id).catch(() => undefined);
      for (const id of made.images) await os.deleteImage(id).catch(() => undefined);
      if (made.flavor)
        await os.request('compute', 'DELETE', `/flavors/${made.flavor}`).catch(() => undefined);
      if (made.network) await deleteNetwork(os, made.network, made.ports, hostNet);
    }
    if (vms.length < this.o.vms) for (const c of ['nova_compute', 'nova_libvirt']) await logTail(c); // set-up failed
    this.tap?.close();
    await this.spcd?.stop();
    if (sb) {
      for (const vm of vms) {
        const c = await vmsh('cleanup', [
          join(this.root, 'libvirt'),
          vm.domain,
          sb.instance,
          vm.qemu.pid,
        ]).catch((e: Error) => ({ error: e.message }));
        console.log(`cleanup ${vm.domain}: ${JSON.stringify(c)}`);
      }
      await cleanupInstance(sb.instance);
      computeHostDown(this.hadRunLibvirt);
      // After the containers are gone: a Linux bridge agent still running (spcd
      // leaves containers running when it stops) would put its chains back.
      if (hostNet) {
        const ids = { ports: [...this.portIds], networks: made.network ? [made.network] : [] };
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
    const summary = this.summary();
    console.log(summary);
    if (process.env.SPCD_E2E_SUMMARY) writeFileSync(process.env.SPCD_E2E_SUMMARY, `${summary}\n`);
  }

  /** The summary line (test/e2e/run-openstack-e2e.sh prints it last); logs the total time first. */
  private summary(): string {
    console.log(`openstack_e2e_total_s=${((Date.now() - this.o.t0) / 1000).toFixed(1)}`);
    return summaryLine({ ...this, checked: this.o.steps * this.o.vms, steps: this.o.steps });
  }
}
