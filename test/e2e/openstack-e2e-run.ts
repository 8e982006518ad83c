/**
 * The state of one OpenStack end-to-end run (test/integration/openstack-e2e.test.ts)
 * and what happens around its checked steps: `setUp` (images, spcd with the
 * control, network and compute sets, Nova up, the guest in Glance, then the
 * first network variant started: its flat network, two VMs booted and pinging
 * each other, the DHCP namespace's pingers), `step` (one change through spcd,
 * then the survival and network checks, its ping window recorded), `tearDown`
 * (everything the run made removed, the summary lines printed and written to
 * SPCD_E2E_SUMMARY). The variants (Linux bridge, Open vSwitch, adoption)
 * share the control plane: openstack-net-variant.ts, openstack-ovs.ts; the
 * OVN variant is a run of its own with ML2/OVN from the start
 * (openstack-ovn.ts).
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { EventTap, IMAGE_11, run, SpcdApi, vmsh } from './libvirt-e2e-harness.js';
import { OpenStack } from './openstack-client.js';
import {
  buildAll,
  computeHost,
  computeHostDown,
  logTail,
  COMPUTE_SET,
  CONTROL_SET,
  NETWORK_SET,
  prepareRoot,
  removeVolumes,
  renderSetFile,
  type Rendering,
} from './openstack-e2e-harness.js';
import { setMembers } from './openstack-control-steps.js';
import { hostNetworkDown, hostNetworkLeft, hostNetworkUp, type HostNet } from './openstack-network.js';
import { GUEST_CMDLINE, pingReport, reportLines } from './openstack-ping.js';
import { uploadGuest, linuxBridgeL2 } from './openstack-vm-net.js';
import { SpcdActions, type SpcdControl } from './openstack-actions.js';
import { NetVariant, type RunParts, type VariantName } from './openstack-net-variant.js';
import {
  OVS_VOLUMES,
  ovsComputeFiles,
  ovsHostDown,
  ovsRunBefore,
  OVS_COMPUTE_SET,
  ovsVariant,
} from './openstack-ovs.js';
import { runSummaries } from './openstack-run-summary.js';
import {
  OVN_CENTRAL_VOLUMES,
  OVN_COMPUTE_SET,
  ovnComputeFiles,
  ovnControlFiles,
  ovnHostDown,
  ovnRunBefore,
  ovnVariant,
  physnetDown,
  physnetUp,
} from './openstack-ovn.js';
import { Adoption } from './openstack-adopt.js';
import { KollaComputeHost, kollaBoxName } from './openstack-kolla.js';
import { DOCKER } from '../support/kolla-box.js';
import { computeUpSince, type Acted, type StepResult } from './openstack-steps.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/** Which network variants a run takes (SPCD_E2E_NETWORK): both, on one control plane, or one. */
export type NetworkChoice = 'all' | VariantName;

export interface OpenStackE2eOptions {
  /** spcd runs the compute set only, against a control plane already answering. */
  readonly externalControl: boolean;
  /** spcd's command-line arguments. */
  readonly spcdArgs: string[];
  /** Checked steps of the Linux bridge variant the summary counts (each VM's survival and the network after each). */
  readonly steps: number;
  /** Checked steps of the Open vSwitch variant. */
  readonly ovsSteps: number;
  /** Checked steps of the OVN variant. */
  readonly ovnSteps: number;
  readonly vms: number;
  /** When the run began (Date.now()), for openstack_e2e_total_s. */
  readonly t0: number;
  readonly network: NetworkChoice;
}

export class OpenStackE2eRun {
  sb: Sandbox | undefined;
  root = '';
  prefix = '';
  spcd: SpcdProcess | undefined;
  tap: EventTap | undefined;
  api!: SpcdApi;
  os: OpenStack | undefined;
  /** Glance images and the flavor this run made, removed at the end. */
  readonly made: { images: string[]; flavor?: string; image?: string } = { images: [] };
  /** The host's side of the network (the physnet's veth, namespaces folder, chains before the run). */
  hostNet: HostNet | undefined;
  /** Every Neutron port the run saw (VMs' and DHCP's): their devices are removed at the end. */
  readonly portIds = new Set<string>();
  /** 1 once Nova stopped, started and deleted the VMs (Linux bridge; the adoption variant's). */
  managed = 0;
  adoptManaged = 0;
  ovnManaged = 0;
  /** Containers restarted during the RabbitMQ outage step (undefined: the step did not run). */
  rabbitOutageRestarts: number | undefined;
  readonly ctl: SpcdControl;
  readonly actions: SpcdActions;
  /** The Linux bridge variant (container-sets/linuxbridge/compute.yaml) and the Open vSwitch one (container-sets/compute.yaml). */
  readonly lb: NetVariant;
  readonly ovs: NetVariant;
  /** The same host built by kolla-ansible and adopted by spcd (openstack-adopt.ts). */
  readonly adopt: NetVariant;
  adoption: Adoption | undefined;
  /** The shipped OVN set with neutron-server on ML2/OVN (openstack-ovn.ts; a run of its own). */
  readonly ovn: NetVariant;
  /** The OVN variant's namespace on the physnet (its file). */
  private physnet: string | undefined;
  /** The variant whose compute set spcd runs now. */
  current: NetVariant;
  private hadRunLibvirt = true; // /run/libvirt was there before the run (else the run removes it)
  private ovsRunWas = new Set<string>();
  private ovnRunWas = new Set<string>();
  /** The host files' rendering for this run (set by `setUp`). */
  rendering: Rendering | undefined;

  constructor(private readonly o: OpenStackE2eOptions) {
    this.ctl = {
      api: () => this.api,
      tap: () => this.tap!,
      spcd: () => this.spcd!,
      startSpcd: this.startSpcd,
      libvirt: () => this.name('nova_libvirt'),
    };
    this.actions = new SpcdActions(this.ctl);
    const parts: RunParts = {
      os: () => this.os!,
      api: () => this.api,
      tap: () => this.tap!,
      root: () => this.root,
      instance: () => this.sb!.instance,
      hostNet: () => this.hostNet!,
      name: this.name,
      guest: () => ({ image: this.made.image!, flavor: this.made.flavor! }),
      portIds: this.portIds,
    };
    this.lb = new NetVariant(
      {
        name: 'lb',
        agentBinary: 'neutron-linuxbridge-agent',
        l2: (network) => linuxBridgeL2(this.hostNet!.iface, network),
      },
      parts,
    );
    this.ovs = new NetVariant(
      ovsVariant(() => this.hostNet!.iface, this.name('openvswitch_vswitchd')),
      parts,
    );
    this.adopt = new NetVariant(
      { ...ovsVariant(() => this.hostNet!.iface, 'openvswitch_vswitchd'), name: 'adopt' },
      parts,
    );
    this.ovn = new NetVariant(
      ovnVariant(
        () => this.hostNet!,
        () => this.os!,
        this.name,
        () => this.physnet!,
      ),
      parts,
    );
    this.current = { ovs: this.ovs, adopt: this.ovs, ovn: this.ovn, lb: this.lb, all: this.lb }[o.network];
  }

  /** The OpenStack client (set up by `setUp`). */
  get openstack(): OpenStack {
    return this.os!;
  }

  /** The shipped compute sets' containers keep their names; the test's own sets get the run's prefix. */
  private readonly computeNames = new Set([
    ...setMembers(COMPUTE_SET).containers,
    ...setMembers(OVS_COMPUTE_SET).containers,
    ...setMembers(OVN_COMPUTE_SET).containers,
  ]);
  readonly name = (svc: string): string => (this.computeNames.has(svc) ? svc : `${this.prefix}${svc}`);

  readonly startSpcd = async (env: NodeJS.ProcessEnv = {}): Promise<void> => {
    const host = [
      '--overrides',
      join(this.sb!.root, 'overrides.yaml'),
      '--secrets',
      join(this.sb!.root, 'secrets.yaml'),
    ];
    // The adoption variant's kolla-ansible host keeps its units in a box with systemd as PID 1.
    const systemctl = { SPCD_SYSTEMCTL: `${DOCKER} exec ${kollaBoxName(this.sb!.instance)} systemctl` };
    const p = SpcdProcess.start(this.sb!, [...this.o.spcdArgs, ...host], { ...systemctl, ...env });
    this.spcd = p;
    await p.readyOrExit(300_000);
    this.tap = await EventTap.open(this.sb!.socket);
  };

  /**
   * Images, spcd with the sets (the first variant's compute set), Nova's
   * compute up, the guest and flavor, then the first variant started.
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
    this.hostNet = await hostNetworkUp(root, iface, `spcdp${process.pid % 10_000_000}`);
    const r = { root, prefix: this.prefix, runId: sb.instance, iface };
    this.rendering = r;
    if (!this.o.externalControl) {
      writeSet(sb, 'control.yaml', renderSetFile(CONTROL_SET, r));
      writeSet(sb, 'network.yaml', renderSetFile(NETWORK_SET, r));
      if (this.current === this.ovn) ovnControlFiles(sb, r);
    }
    this.hadRunLibvirt = existsSync('/run/libvirt');
    this.ovsRunWas = ovsRunBefore();
    this.ovnRunWas = ovnRunBefore();
    // Every variant's host files (the secrets are the same): the first one's overrides stay.
    const shipped = computeHost(sb, r);
    if (this.current === this.ovs) this.ovs.shippedSet = ovsComputeFiles(sb, r);
    else if (this.current === this.ovn) {
      this.ovn.shippedSet = ovnComputeFiles(sb, r);
      this.physnet = await physnetUp(this.hostNet, `spcdphy${process.pid % 10_000_000}`);
    } else this.lb.shippedSet = shipped;
    this.adoption = new Adoption(this, new KollaComputeHost(root, sb.instance));
    await this.bringUp();
    // The adoption variant alone starts from spcd's Open vSwitch set with no VMs on it.
    if (this.o.network !== 'adopt') await this.current.start();
    await vmsh('api-probe', [join(root, 'libvirt'), IMAGE_11, sb.instance]);
  }

  /** spcd started, the control plane and nova-compute up, Neutron listing networks, the guest and flavor made. */
  private async bringUp(): Promise<void> {
    const sb = this.sb!;
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
    await this.computeUp(tStart, 1_200_000);
    console.log(`control and compute up in ${((Date.now() - tUp) / 1000).toFixed(1)} s`);
    // neutron-server starts after its own bootstrap tasks; Nova's server views need it.
    await waitFor('Neutron listing networks', () => os.warmNeutron().then(() => true), {
      timeoutMs: 900_000,
      intervalMs: 3000,
    });
    const made = this.made;
    made.image = await uploadGuest(os, sb.instance, join(sb.root, 'root.img'), GUEST_CMDLINE, made.images);
    made.flavor = await os.createFlavor(`${sb.instance}-128`, 128, 1, 1);
  }

  /** nova-compute up in Nova with a heartbeat after `since`; a failed bootstrap task ends the wait at once. */
  async computeUp(since: number, timeoutMs: number): Promise<void> {
    const came = await waitFor(
      'nova-compute up in Nova (the sets bootstrapped)',
      async () => {
        if (this.spcd?.logged('BOOTSTRAP_FAILED')) return 'bootstrap-failed';
        return (await computeUpSince(this.os!, since)) && 'up';
      },
      { timeoutMs, intervalMs: 5000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\nspcd said:\n${this.spcd?.output.slice(-30).join('\n') ?? ''}`);
    });
    if (came === 'bootstrap-failed')
      throw new Error(
        `a bootstrap task failed:\n${this.spcd!.output.filter((l) => l.includes('BOOTSTRAP_FAILED')).join('\n')}`,
      );
  }

  /** One checked step of the current variant. */
  step(label: string, act: () => Promise<Acted>): Promise<StepResult> {
    return this.current.step(label, act);
  }

  /** Removes everything the run made, then prints (and writes) the summary lines. */
  async tearDown(): Promise<void> {
    const { made, hostNet, sb, os } = this;
    const variants = [this.lb, this.ovs, this.adopt, this.ovn];
    const vms = variants.flatMap((v) => v.vms);
    for (const v of variants) this.unclosedPings(v);
    // Nova removes what it can; the rest goes by PID and by id.
    if (os) {
      for (const v of variants)
        await v.remove().catch((e: Error) => console.log(`${v.spec.name}: ${e.message}`));
      for (const id of made.images) await os.deleteImage(id).catch(() => undefined);
      if (made.flavor)
        await os.request('compute', 'DELETE', `/flavors/${made.flavor}`).catch(() => undefined);
    }
    if (this.current.vms.length < this.o.vms)
      for (const c of ['nova_compute', 'nova_libvirt', this.name('neutron_server')]) await logTail(c); // set-up failed
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
      console.log(`kolla host removed: ${(await this.adoption?.host.down())?.join(',') || 'nothing'}`);
      computeHostDown(this.hadRunLibvirt);
      const central = OVN_CENTRAL_VOLUMES.map(this.name);
      console.log(`ovs volumes removed: ${removeVolumes([...OVS_VOLUMES, ...central]).join(',') || 'none'}`);
      console.log(`ovs host: ${(await ovsHostDown(this.ovsRunWas)).join(', ') || 'nothing'}`);
      console.log(`ovn host: ${ovnHostDown(this.ovnRunWas).join(', ') || 'nothing'}`);
      if (hostNet && this.physnet)
        console.log(`physnet: ${(await physnetDown(hostNet, basename(this.physnet))).join(', ')}`);
      // After the containers are gone: an agent still running (spcd leaves
      // containers running when it stops) would put its chains back.
      if (hostNet) {
        const networks = variants.flatMap((v) => (v.made.network ? [v.made.network] : []));
        const ids = { ports: [...this.portIds], networks };
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
    const lines = runSummaries(this, this.o);
    for (const l of lines) console.log(l);
    if (process.env.SPCD_E2E_SUMMARY) writeFileSync(process.env.SPCD_E2E_SUMMARY, `${lines.join('\n')}\n`);
  }

  /** A variant that failed before its ping test still shows what the pings saw (its line keeps vm_ping_lost=nan). */
  private unclosedPings(v: NetVariant): void {
    if (v.ping || !v.windows.length) return;
    try {
      const r = pingReport(v.pingSources(), v.windows, v.nsPing?.directions(v.windows));
      for (const l of reportLines(r)) console.log(`(unclosed ${v.spec.name}) ${l}`);
    } catch (e) {
      console.log(`ping report (${v.spec.name}): ${(e as Error).message}`);
    }
  }
}
