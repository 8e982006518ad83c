/**
 * The Open vSwitch variant of the OpenStack end-to-end test
 * (docs/explanation/openstack-proof.md): the shipped compute set
 * container-sets/compute.yaml (kolla-ansible's default: openvswitch_db,
 * openvswitch_vswitchd, neutron_openvswitch_agent beside nova) unchanged,
 * with this host's overrides (container-sets-e2e/hosts/openstack-compute-ovs.yaml:
 * the userspace datapath, no --privileged, the test's images) and the DHCP
 * agent on Open vSwitch. Here: the compute host's files, the variant's view
 * of where ports are plugged (OVSDB's bridges, read in the vswitchd
 * container), the switch from the Linux bridge variant on the same control
 * plane, and what the variant leaves on the host (OVSDB's run folder, the
 * userspace datapath's TAP devices).
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../support/daemon.js';
import { run } from './libvirt-e2e-harness.js';
import type { OpenStack } from './openstack-client.js';
import { renderSetFile, type Rendering } from './openstack-e2e-harness.js';
import type { L2View } from './openstack-vm-net.js';
import type { VariantSpec } from './openstack-net-variant.js';

/** The shipped Open vSwitch compute set the variant copies unchanged. */
export const OVS_COMPUTE_SET = join(REPO, 'container-sets', 'compute.yaml');
export const OVS_OVERRIDES = join(REPO, 'container-sets-e2e', 'hosts', 'openstack-compute-ovs.yaml');
/** Neutron's integration bridge and the physnet's bridge (the overrides' bridge_mappings). */
export const INT_BRIDGE = 'br-int';
export const PHYS_BRIDGE = 'br-spcde2e';
/** The upgrade target of the Open vSwitch containers (scripts/openvswitch/build-images.sh). */
export const OVS_NEXT_IMAGE = 'spcd-e2e/openvswitch:zed-next';
export const OVS_IMAGE = 'spcd-e2e/openvswitch:zed';
/** The named volume the variant adds to the compute set's (spcd creates it, the run removes it). */
export const OVS_VOLUMES = ['openvswitch_db'];
const RUN_DIR = '/run/openvswitch';

/**
 * The variant's compute host: the shipped set copied as it is into spcd's
 * sets folder and the overrides rendered for this run. Returns 1 when the
 * copy is the shipped file byte for byte.
 */
export function ovsComputeFiles(sb: { setsDir: string; root: string }, r: Rendering): 1 {
  return shippedComputeFiles(sb, r, OVS_COMPUTE_SET, OVS_OVERRIDES);
}

/**
 * A variant's compute host: the shipped `set` copied as it is into spcd's
 * sets folder as compute.yaml, and this machine's `overrides` rendered for
 * the run. Returns 1 when the copy is the shipped file byte for byte.
 */
export function shippedComputeFiles(
  sb: { setsDir: string; root: string },
  r: Rendering,
  set: string,
  overrides: string,
): 1 {
  const copy = join(sb.setsDir, 'compute.yaml');
  writeFileSync(copy, readFileSync(set, 'utf8'));
  writeFileSync(join(sb.root, 'overrides.yaml'), renderSetFile(overrides, r));
  if (readFileSync(copy, 'utf8') !== readFileSync(set, 'utf8'))
    throw new Error(`the compute set spcd runs (${copy}) differs from ${set}`);
  return 1;
}

/** The ports of each bridge, as OVSDB lists them (in the vswitchd container). */
export async function bridgePorts(
  vswitchd: string,
  bridges: readonly string[],
): Promise<Map<string, string[]>> {
  const script = bridges.map((b) => `ovs-vsctl list-ports ${b}; echo ---`).join('; ');
  const out = await run('/usr/bin/docker', ['exec', vswitchd, 'sh', '-c', script], 60_000);
  const parts = out.stdout.split('---\n');
  return new Map(bridges.map((b, i) => [b, (parts[i] ?? '').split('\n').filter(Boolean)]));
}

/**
 * The Open vSwitch variant: the physnet's veth is a port of its bridge; a
 * VM's port is on the integration bridge as the hybrid plug's qvo (the
 * iptables_hybrid firewall), the DHCP port as the veth's tap (ovs_use_veth).
 */
export function ovsVariant(iface: () => string, vswitchd: string): VariantSpec {
  const l2 = async (): Promise<L2View> => {
    const ports = await bridgePorts(vswitchd, [INT_BRIDGE, PHYS_BRIDGE]);
    const onInt = new Set(ports.get(INT_BRIDGE));
    const onPhys = ports.get(PHYS_BRIDGE) ?? [];
    return {
      uplinkOk: onPhys.includes(iface()),
      plugged: (p) => onInt.has(`qvo${p.id.slice(0, 11)}`) || onInt.has(`tap${p.id.slice(0, 11)}`),
      line: `bridge=${INT_BRIDGE} on_bridge=${[...onInt].sort().join(',')} ${PHYS_BRIDGE}=${onPhys.join(',')}`,
    };
  };
  return { name: 'ovs', agentBinary: 'neutron-openvswitch-agent', l2 };
}

/**
 * After the Linux bridge variant's servers and network are gone: its agent's
 * record deleted from Neutron (a dead agent's record would stay), and its
 * leftovers on the run's veth (the brq bridge the agent put it in) undone,
 * so that Open vSwitch can take the veth as its bridge's port.
 */
export async function leaveLinuxBridge(os: OpenStack, iface: string): Promise<string[]> {
  const done: string[] = [];
  for (const a of await os.agents())
    if (a.binary === 'neutron-linuxbridge-agent') {
      await os.request('network', 'DELETE', `/v2.0/agents/${a.id}`, { ok: [204, 404] });
      done.push(`agent ${a.id} deleted`);
    }
  const master = await run('ip', ['-o', 'link', 'show', iface], 60_000);
  const m = / master (\S+)/.exec(master.stdout);
  if (m) {
    await run('ip', ['link', 'set', iface, 'nomaster'], 60_000);
    done.push(`${iface} out of ${m[1]}`);
    if (m[1]!.startsWith('brq')) {
      await run('ip', ['link', 'del', m[1]!], 60_000).catch(() => undefined);
      done.push(`${m[1]} deleted`);
    }
  }
  return done;
}

/** The entries of /run/openvswitch before the run (the variant removes only what it added). */
export function ovsRunBefore(): Set<string> {
  return new Set(existsSync(RUN_DIR) ? readdirSync(RUN_DIR) : []);
}

/**
 * After the run's containers are gone: what OVSDB and vswitchd left in
 * /run/openvswitch (sockets, pid files, saved flows) that was not there
 * before, and the userspace datapath's TAP devices of the bridges.
 */
export async function ovsHostDown(before: ReadonlySet<string>): Promise<string[]> {
  const removed: string[] = [];
  if (existsSync(RUN_DIR))
    for (const e of readdirSync(RUN_DIR))
      if (!before.has(e)) {
        rmSync(join(RUN_DIR, e), { recursive: true, force: true });
        removed.push(`${RUN_DIR}/${e}`);
      }
  for (const dev of [INT_BRIDGE, PHYS_BRIDGE, 'ovs-netdev'])
    if (existsSync(`/sys/class/net/${dev}`)) {
      await run('ip', ['link', 'del', dev], 60_000).catch(() => undefined);
      removed.push(dev);
    }
  return removed;
}
