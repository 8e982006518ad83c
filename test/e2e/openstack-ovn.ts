/**
 * The OVN variant of the OpenStack end-to-end test
 * (docs/explanation/openstack-proof.md): the shipped OVN compute set
 * (container-sets/ovn/compute.yaml: nova, openvswitch_db,
 * openvswitch_vswitchd, ovn_controller; no Neutron agent on the host)
 * unchanged, with this host's overrides
 * (container-sets-e2e/hosts/openstack-compute-ovn.yaml), OVN's central
 * services in a control set of their own (container-sets-e2e/openstack/ovn.yaml)
 * and neutron-server on ML2/OVN. OVN answers DHCP itself (ovn-controller,
 * from the subnet's gateway address), so there is no DHCP agent and no
 * qdhcp namespace: the namespace that pings the VMs is the test's own, on
 * the physnet (the veth peer of the bridge's port). Here: the files, the
 * variant's view of the network (OVSDB's bridges, OVN's port bindings and
 * DHCP options), the physnet's namespace, and what the variant leaves on
 * the host.
 */
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { REPO, writeSet, type Sandbox } from '../support/daemon.js';
import { run } from './libvirt-e2e-harness.js';
import type { OpenStack, Port } from './openstack-client.js';
import { NETWORK_SET, renderSetFile, type Rendering } from './openstack-e2e-harness.js';
import type { HostNet } from './openstack-network.js';
import { bridgePorts, INT_BRIDGE, PHYS_BRIDGE, shippedComputeFiles } from './openstack-ovs.js';
import type { VariantCheck, VariantSpec } from './openstack-net-variant.js';
import type { L2View } from './openstack-vm-net.js';

export const OVN_COMPUTE_SET = join(REPO, 'container-sets', 'ovn', 'compute.yaml');
export const OVN_OVERRIDES = join(REPO, 'container-sets-e2e', 'hosts', 'openstack-compute-ovn.yaml');
export const OVN_CENTRAL_SET = join(REPO, 'container-sets-e2e', 'openstack', 'ovn.yaml');
/** The central databases (ovn.yaml's loopback ports). */
const NB = 'tcp:127.0.0.1:16641';
const SB = 'tcp:127.0.0.1:16642';
/** The subnet's gateway: ML2/OVN writes DHCP options only for a subnet with one (or a metadata port). */
export const OVN_GATEWAY = '10.251.0.1';
/** The physnet namespace's address (outside the subnet's pool and the VMs' addresses). */
const PHYSNET_ADDRESS = '10.251.0.2/24';
/** The central set's named volumes (under the run's prefix). */
export const OVN_CENTRAL_VOLUMES = ['ovn_nb_db', 'ovn_sb_db'];
const RUN_OVN = '/run/ovn';
const TIMEOUT = 60_000;

interface NetworkSetDoc {
  description?: string;
  defaults: { neutron_server: Record<string, unknown> };
  containers: Record<string, unknown>;
}

/**
 * The network set for OVN: neutron-server on ML2/OVN (OVN's mechanism driver
 * alone, flat and geneve networks, OVN's L3 plugin, the central databases),
 * and no DHCP agent.
 */
export function ovnNetworkSet(text: string, prefix: string): string {
  const doc = yaml.load(text) as NetworkSetDoc;
  const dhcp = `${prefix}neutron_dhcp_agent`;
  if (!doc.containers[dhcp]) throw new Error(`the network set has no ${dhcp}`);
  delete doc.containers[dhcp];
  const server = doc.defaults.neutron_server;
  server.ml2 = {
    ...(server.ml2 as Record<string, unknown>),
    type_drivers: ['flat', 'geneve', 'local'],
    tenant_network_types: ['geneve'],
    mechanism_drivers: ['ovn'],
  };
  server.ovn = { nb_connection: NB, sb_connection: SB };
  doc.description = 'neutron-server on ML2/OVN for the OpenStack end-to-end test (OVN answers DHCP)';
  return yaml.dump(doc, { noRefs: true, lineWidth: -1 });
}

/** The control plane's OVN files: the central set, and the network set on ML2/OVN. */
export function ovnControlFiles(sb: Sandbox, r: Rendering): void {
  writeSet(sb, 'ovn-central.yaml', renderSetFile(OVN_CENTRAL_SET, r));
  writeSet(sb, 'network.yaml', ovnNetworkSet(renderSetFile(NETWORK_SET, r), r.prefix));
}

/** The variant's compute host: the shipped OVN set as it is, and this machine's overrides (1: the copy is the shipped file). */
export function ovnComputeFiles(sb: { setsDir: string; root: string }, r: Rendering): 1 {
  return shippedComputeFiles(sb, r, OVN_COMPUTE_SET, OVN_OVERRIDES);
}

/** Each logical port's binding in the southbound database: bound to a chassis, and up. */
async function portBindings(sbDb: string): Promise<Map<string, { bound: boolean; up: boolean }>> {
  const out = await run(
    '/usr/bin/docker',
    [
      'exec',
      sbDb,
      'ovn-sbctl',
      `--db=${SB}`,
      '--format=csv',
      '--data=bare',
      '--no-headings',
      '--columns=logical_port,chassis,up',
      'list',
      'Port_Binding',
    ],
    TIMEOUT,
  );
  const m = new Map<string, { bound: boolean; up: boolean }>();
  for (const line of out.stdout.split('\n').filter(Boolean)) {
    const [port = '', chassis = '', up = ''] = line.split(',');
    m.set(port, { bound: chassis !== '', up: up === 'true' });
  }
  return m;
}

/**
 * The chassis's settings Neutron 21 reads, copied where it reads them.
 * Debian's Zed Neutron (21.0) finds a chassis's bridge mappings, datapath
 * type and interface types in the southbound Chassis row's external_ids;
 * Debian's OVN 23.03 writes them in other_config only (as OVN has since
 * 22.x, and Neutron reads there since). Without the copy ML2/OVN finds no
 * physnet on the chassis and refuses to bind any port of the flat network.
 * Kolla's 2024.1 images pair a Neutron and an OVN that agree: this is the
 * test images' Debian pairing, not the shipped set's.
 */
async function chassisForOldNeutron(sbDb: string, chassis: string): Promise<string> {
  const sbctl = (...args: string[]): Promise<{ stdout: string }> =>
    run('/usr/bin/docker', ['exec', sbDb, 'ovn-sbctl', `--db=${SB}`, ...args], TIMEOUT);
  const copied: string[] = [];
  for (const key of ['ovn-bridge-mappings', 'datapath-type', 'iface-types', 'ovn-cms-options']) {
    const v = await sbctl('--if-exists', 'get', 'Chassis', chassis, `other_config:${key}`);
    const value = v.stdout.trim();
    if (!value) continue;
    await sbctl('set', 'Chassis', chassis, `external_ids:${key}=${value}`);
    copied.push(`${key}=${value}`);
  }
  return `chassis ${chassis} external_ids for Neutron 21: ${copied.join(' ') || 'nothing to copy'}`;
}

/** How many DHCP option rows the northbound database has (ML2/OVN writes one per subnet). */
async function dhcpOptions(nbDb: string): Promise<number> {
  const out = await run(
    '/usr/bin/docker',
    ['exec', nbDb, 'ovn-nbctl', `--db=${NB}`, 'dhcp-options-list'],
    TIMEOUT,
  );
  return out.stdout.split('\n').filter(Boolean).length;
}

/**
 * The OVN variant: a VM's port is its tap on the integration bridge (no
 * hybrid plug: OVN's ACLs are in Open vSwitch), bound to this chassis and up
 * in the southbound database; the physnet's veth is a port of its bridge;
 * the subnet has OVN's DHCP options.
 */
export function ovnVariant(
  hostNet: () => HostNet,
  os: () => OpenStack,
  /** A container's name in the run (the central set's carry the run's prefix). */
  name: (svc: string) => string,
  pingFrom: () => string,
  /** The chassis's name (the compute host's host_name). */
  chassis = 'spcd-e2e-compute',
): VariantSpec {
  const l2 = async (): Promise<L2View> => {
    const ports = await bridgePorts(name('openvswitch_vswitchd'), [INT_BRIDGE, PHYS_BRIDGE]);
    const onInt = new Set(ports.get(INT_BRIDGE));
    const onPhys = ports.get(PHYS_BRIDGE) ?? [];
    return {
      uplinkOk: onPhys.includes(hostNet().iface),
      plugged: (p) => onInt.has(`tap${p.id.slice(0, 11)}`),
      line: `bridge=${INT_BRIDGE} on_bridge=${[...onInt].sort().join(',')} ${PHYS_BRIDGE}=${onPhys.join(',')}`,
    };
  };
  const check = async (c: VariantCheck): Promise<{ failures: string[]; line: string }> => {
    const failures: string[] = [];
    const ports = await os().ports(`network_id=${c.network}`);
    for (const p of ports) c.portIds.add(p.id);
    const vmPorts = c.serverIds.map((id) => ports.find((p) => p.device_id === id));
    if (vmPorts.some((p) => !p)) failures.push(`VM ports: ${vmPorts.filter(Boolean).length}`);
    const view = await l2();
    if (!view.uplinkOk) failures.push(`${hostNet().iface} not on its bridge (${view.line})`);
    const bindings = await portBindings(name('ovn_sb_db'));
    for (const p of vmPorts.filter((x): x is Port => !!x)) {
      if (p.status !== 'ACTIVE') failures.push(`port ${p.id} is ${p.status}`);
      if (!view.plugged(p)) failures.push(`port ${p.id} not plugged (${view.line})`);
      const b = bindings.get(p.id);
      if (!b?.bound || !b.up) failures.push(`port ${p.id} in OVN: ${b ? JSON.stringify(b) : 'no binding'}`);
    }
    const dhcp = await dhcpOptions(name('ovn_nb_db'));
    if (dhcp < 1) failures.push('no DHCP options in the northbound database');
    const up = vmPorts.filter((p) => p && bindings.get(p.id)?.up).length;
    const line =
      `network=${c.network} ports_active=${vmPorts.filter((p) => p?.status === 'ACTIVE').length} ` +
      `ovn_bound_up=${up} dhcp_options=${dhcp} ${view.line}`;
    return { failures, line };
  };
  return {
    name: 'ovn',
    agentBinary: 'ovn-controller',
    l2,
    withoutDhcpAgent: {
      check,
      pingFrom,
      gateway: OVN_GATEWAY,
      prepare: () => chassisForOldNeutron(name('ovn_sb_db'), chassis),
    },
  };
}

/**
 * The physnet's one host: the veth peer of the bridge's port moved into a
 * namespace of the test's, with an address in the subnet (IPv6 off, so it
 * sends nothing but what the pingers send). Returns the namespace's file.
 */
export async function physnetUp(hostNet: HostNet, ns: string): Promise<string> {
  await run('ip', ['netns', 'add', ns], TIMEOUT);
  await run('ip', ['link', 'set', hostNet.peer, 'netns', ns], TIMEOUT);
  await run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'], TIMEOUT);
  await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'], TIMEOUT);
  await run('ip', ['-n', ns, 'addr', 'add', PHYSNET_ADDRESS, 'dev', hostNet.peer], TIMEOUT);
  await run('ip', ['-n', ns, 'link', 'set', hostNet.peer, 'up'], TIMEOUT);
  await run('ip', ['link', 'set', hostNet.iface, 'up'], TIMEOUT);
  return `/run/netns/${ns}`;
}

/** The peer back in the host's namespace (down), and the namespace deleted. */
export async function physnetDown(hostNet: HostNet, ns: string): Promise<string[]> {
  if (!existsSync(`/run/netns/${ns}`)) return [];
  await run('ip', ['-n', ns, 'link', 'set', hostNet.peer, 'down'], TIMEOUT).catch(() => undefined);
  await run('ip', ['-n', ns, 'link', 'set', hostNet.peer, 'netns', '1'], TIMEOUT).catch(() => undefined);
  await run('ip', ['netns', 'del', ns], TIMEOUT);
  return [`netns ${ns}`];
}

/** The entries of /run/ovn before the run (the variant removes only what it added). */
export function ovnRunBefore(): Set<string> {
  return new Set(existsSync(RUN_OVN) ? readdirSync(RUN_OVN) : []);
}

/** What ovn-controller left in /run/ovn that was not there before. */
export function ovnHostDown(before: ReadonlySet<string>): string[] {
  const removed: string[] = [];
  if (existsSync(RUN_OVN))
    for (const e of readdirSync(RUN_OVN))
      if (!before.has(e)) {
        rmSync(join(RUN_OVN, e), { recursive: true, force: true });
        removed.push(`${RUN_OVN}/${e}`);
      }
  return removed;
}
