/**
 * One network variant of the OpenStack end-to-end test
 * (docs/explanation/openstack-proof.md): the Linux bridge agent, Open
 * vSwitch with Neutron's agent, or OVN (no DHCP agent: its own network
 * check, and pingers in a namespace on the physnet; openstack-ovn.ts). Each
 * has its own flat network on the run's veth, its two VMs pinging each
 * other, the namespace's pingers, its
 * checked steps with their ping windows, and its network check (the
 * variant's `l2` view of where the ports are plugged). The control plane,
 * spcd, the guest image and the flavor are the run's (openstack-e2e-run.ts)
 * and outlive a variant.
 */
import { join } from 'node:path';
import { waitFor } from '../support/wait.js';
import type { EventTap, SpcdApi } from './libvirt-e2e-harness.js';
import type { OpenStack } from './openstack-client.js';
import { ConsoleWatch, volumeDir } from './openstack-e2e-harness.js';
import { NET_CIDR, PHYSNET, type HostNet } from './openstack-network.js';
import { NetnsPing } from './openstack-ns-ping.js';
import {
  DHCP_POOL,
  pingReport,
  reportLines,
  VM_IPS,
  waitPinging,
  waitReplyAfter,
  type PingReport,
  type PingSource,
} from './openstack-ping.js';
import { consoleLog, runStep, waitQemu, type Acted, type StepResult, type Vm } from './openstack-steps.js';
import { bootActive, deleteNetwork, networkCheck, networkSettled, type L2View } from './openstack-vm-net.js';
import type { PingWindow } from './ping-log.js';

/** What a variant takes from the run: the clients, the host's network and the guest. */
export interface RunParts {
  readonly os: () => OpenStack;
  readonly api: () => SpcdApi;
  readonly tap: () => EventTap;
  /** The run's host folder (its libvirt root is ROOT/libvirt). */
  readonly root: () => string;
  readonly instance: () => string;
  readonly hostNet: () => HostNet;
  /** A container's name in this run (the test's own sets carry the run's prefix). */
  readonly name: (svc: string) => string;
  /** The guest's Glance image and the flavor. */
  readonly guest: () => { image: string; flavor: string };
  /** Every Neutron port the run saw: their devices are removed at the end. */
  readonly portIds: Set<string>;
}

/** How long after a step the guests and the namespace may wait for their next reply. */
const TRAFFIC_BACK_MS = 60_000;

export type VariantName = 'lb' | 'ovs' | 'adopt' | 'ovn';

export interface VariantSpec {
  readonly name: VariantName;
  /** The binary of the L2 agent Neutron must show alive on the compute host. */
  readonly agentBinary: string;
  /** Where the ports are plugged, as this variant sees it. */
  readonly l2: (network: string) => Promise<L2View>;
  /** No DHCP agent (OVN answers DHCP itself): the variant's own `check` replaces networkCheck. */
  readonly withoutDhcpAgent?: {
    readonly check: (c: VariantCheck) => Promise<{ failures: string[]; line: string }>;
    /** The namespace file the pingers run in (instead of qdhcp-<network>). */
    readonly pingFrom: () => string;
    /** The subnet's gateway address (OVN's DHCP answers only on a subnet with one). */
    readonly gateway: string;
    /** Before the network is made, once the agents are alive; returns what it did. */
    readonly prepare: () => Promise<string>;
  };
}

/** What a variant's own network check is given. */
export interface VariantCheck {
  readonly network: string;
  readonly serverIds: readonly string[];
  /** Every port seen is added here (their devices are removed at the end). */
  readonly portIds: Set<string>;
}

export class NetVariant {
  readonly vms: Vm[] = [];
  /** The network and the VMs' ports this variant made (the ports are made first, with fixed addresses). */
  readonly made: { network?: string; ports: string[] } = { ports: [] };
  /** One window of host time (epoch s) per step: the ping losses are placed in them. */
  readonly windows: PingWindow[] = [];
  readonly results: StepResult[] = [];
  /** Steps after which the network check found nothing wrong. */
  networkOk = 0;
  /** Both VMs pinged from the DHCP agent's qdhcp namespace. */
  nsPing: NetnsPing | undefined;
  ping: PingReport | undefined;
  /** VM pings lost on the host's path from tap to tap, when captured (tap-capture.ts). */
  wireLost: number | undefined;
  /** 1 when the compute set spcd ran for the variant was the shipped file, byte for byte. */
  shippedSet = 0;
  /** vswitchd's own restart in the variant's vswitchd upgrade (ms; Open vSwitch and OVN). */
  vswitchdRestartMs: number | undefined;

  constructor(
    readonly spec: VariantSpec,
    private readonly run: RunParts,
  ) {}

  /** Each VM's direction: its stamped console, pinging the other VM's address. */
  readonly pingSources = (): PingSource[] =>
    this.vms.map((v, i) => ({ from: v.domain, peer: VM_IPS[1 - i]!, text: () => v.console.pingText() }));

  readonly networkCheck = (): ReturnType<typeof networkCheck> => {
    const own = this.spec.withoutDhcpAgent;
    if (own)
      return own.check({
        network: this.made.network!,
        serverIds: this.vms.map((v) => v.id),
        portIds: this.run.portIds,
      });
    return networkCheck({
      os: this.run.os(),
      network: this.made.network!,
      hostNet: this.run.hostNet(),
      serverIds: this.vms.map((v) => v.id),
      vms: 2,
      dhcpAgent: this.run.name('neutron_dhcp_agent'),
      portIds: this.run.portIds,
      l2: this.spec.l2,
    });
  };

  /**
   * The variant's agents alive, its network, two VMs ACTIVE on it with their
   * counters, plugged, pinging each other, and the DHCP namespace pinging both.
   */
  async start(): Promise<void> {
    const os = this.run.os();
    const inst = `${this.run.instance()}-${this.spec.name}`;
    await this.agentsAlive();
    const prepared = await this.spec.withoutDhcpAgent?.prepare();
    if (prepared) console.log(`${this.spec.name}: ${prepared}`);
    const gateway = this.spec.withoutDhcpAgent?.gateway;
    const net = await os.createNetwork(`${inst}-net`, 'flat', PHYSNET, NET_CIDR, DHCP_POOL, gateway);
    this.made.network = net.network;
    for (const [i, ip] of VM_IPS.entries())
      this.made.ports.push(await os.createPort(`${inst}-vm-${i + 1}`, net.network, net.subnet, ip));
    const tBoot = Date.now();
    const { image, flavor } = this.run.guest();
    const ids: string[] = [];
    for (const [i, port] of this.made.ports.entries())
      ids.push(await bootActive(os, `${inst}-vm-${i + 1}`, image, flavor, port));
    const libvirtRoot = join(this.run.root(), 'libvirt');
    for (const id of ids) {
      const s = (await os.server(id))!;
      const domain = s['OS-EXT-SRV-ATTR:instance_name']!;
      const qemu = await waitQemu(libvirtRoot, domain);
      const console_ = new ConsoleWatch(consoleLog(join(volumeDir('nova_compute'), 'instances'), id));
      this.vms.push({ id, domain, qemu, console: console_ });
    }
    for (const vm of this.vms)
      await waitFor(`${vm.domain}'s console counter`, () => vm.console.last() >= 3, {
        timeoutMs: 300_000,
        intervalMs: 500,
      });
    console.log(
      `${this.spec.name}: two VMs ACTIVE with their counters in ${((Date.now() - tBoot) / 1000).toFixed(1)} s: ${this.vms.map((v) => `${v.domain}=${v.qemu.pid}`).join(' ')}`,
    );
    const plugged = await networkSettled(this.networkCheck);
    if (plugged.failures.length)
      throw new Error(
        `${this.spec.name}: the VM and DHCP ports not ACTIVE and plugged: ${plugged.failures.join('; ')}`,
      );
    console.log(`${this.spec.name} network: ${plugged.line}`);
    await this.startPings();
  }

  private async agentsAlive(): Promise<void> {
    const os = this.run.os();
    const t0 = Date.now();
    const agents = await waitFor(
      `the ${this.spec.agentBinary}${this.spec.withoutDhcpAgent ? '' : ' and DHCP'} agents alive in Neutron`,
      async () => {
        const a = await os.agents();
        const l2 = a.find((x) => x.binary === this.spec.agentBinary && x.alive);
        const dhcp =
          this.spec.withoutDhcpAgent || a.find((x) => x.binary === 'neutron-dhcp-agent' && x.alive);
        return l2 && dhcp && a;
      },
      { timeoutMs: 600_000, intervalMs: 3000 },
    );
    console.log(
      `${this.spec.name}: agents alive after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${agents.map((a) => `${a.binary}@${a.host}${a.alive ? '' : '(dead)'}`).join(' ')}`,
    );
  }

  private async startPings(): Promise<void> {
    const tPing = Date.now();
    await waitPinging(this.pingSources(), 300_000);
    console.log(
      `${this.spec.name}: both guests ping each other ${((Date.now() - tPing) / 1000).toFixed(1)} s after the ports were up`,
    );
    const tNs = Date.now();
    this.nsPing = await NetnsPing.start({
      os: this.run.os(),
      netns:
        this.spec.withoutDhcpAgent?.pingFrom() ??
        join(this.run.hostNet().netnsDir, `qdhcp-${this.made.network!}`),
      ports: this.made.ports,
      ips: VM_IPS,
      cidr: NET_CIDR,
      timeoutMs: 120_000,
    });
    console.log(
      `${this.nsPing.namespace} pings both VMs ${((Date.now() - tNs) / 1000).toFixed(1)} s after its start`,
    );
  }

  /**
   * One change through spcd (`act`), then the VMs' survival (runStep) and the
   * network after it, with a deadline; its ping window is recorded.
   */
  async step(label: string, act: () => Promise<Acted>): Promise<StepResult> {
    const from = Date.now() / 1000;
    const root = join(this.run.root(), 'libvirt');
    const r = await runStep(
      {
        os: this.run.os(),
        api: this.run.api(),
        tap: this.run.tap,
        libvirtRoot: root,
        libvirt: this.run.name('nova_libvirt'),
        compute: this.run.name('nova_compute'),
        vms: this.vms,
        deadlineMs: 600_000,
      },
      label,
      act,
    );
    const net = await networkSettled(this.networkCheck);
    r.failures.push(...net.failures.map((f) => `network: ${f}`));
    if (!net.failures.length) this.networkOk++;
    console.log(`${label} network: ok_after_s=${net.afterS.toFixed(1)} ${net.line}`);
    r.failures.push(...(await this.trafficBack(label)));
    this.windows.push({ name: label, from, to: Date.now() / 1000 });
    this.results.push(r);
    return r;
  }

  /**
   * Waits until every direction (guests and namespace) has a reply stamped
   * after now, so the step's window closes only once traffic flows again:
   * losses are placed between the replies around them, and a window closed
   * while forwarding was still down (ports ACTIVE, vswitchd not yet
   * forwarding) put the end of the outage outside every step.
   */
  private async trafficBack(label: string): Promise<string[]> {
    const t = Date.now() / 1000;
    try {
      await waitReplyAfter(this.pingSources(), t, TRAFFIC_BACK_MS);
      await this.nsPing?.waitReplyAfter(t, TRAFFIC_BACK_MS);
      console.log(`${label} traffic: back_after_s=${(Date.now() / 1000 - t).toFixed(1)}`);
      return [];
    } catch (e) {
      return [`traffic: ${(e as Error).message}`];
    }
  }

  /**
   * Ends the pings once every direction has a reply after the last step:
   * the namespace's pingers stopped, every packet counted and each loss
   * placed in its step (`ping`, printed with `tag`). Returns the report and
   * the pingers that outlived their stop.
   */
  async closePings(tag: string): Promise<{ ping: PingReport; left: readonly number[] }> {
    const end = this.windows.at(-1)?.to ?? Date.now() / 1000;
    await waitReplyAfter(this.pingSources(), end, TRAFFIC_BACK_MS);
    await this.nsPing!.waitReplyAfter(end, TRAFFIC_BACK_MS);
    const nsStop = await this.nsPing!.stop();
    const ping = pingReport(this.pingSources(), this.windows, this.nsPing!.directions(this.windows));
    this.ping = ping;
    for (const l of reportLines(ping)) console.log(`${tag} ${l}`);
    return { ping, left: nsStop.left };
  }

  private removed = false;

  /** The namespace's pingers stopped, the VMs deleted in Nova, the network and ports deleted (once). */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    const os = this.run.os();
    for (const vm of this.vms) vm.console.stop();
    if (this.nsPing) console.log(`ns pingers stopped: ${JSON.stringify(await this.nsPing.stop())}`);
    for (const vm of this.vms) await os.deleteServer(vm.id).catch(() => undefined);
    if (this.made.network) await deleteNetwork(os, this.made.network, this.made.ports, this.run.hostNet());
  }
}
