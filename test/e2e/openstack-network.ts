/**
 * The host side of the OpenStack end-to-end test's network (issue #15,
 * docs/explanation/openstack-network.md): the flat physnet's interface (one end of a veth
 * pair with no address whose peer stays down and in no bridge: no uplink; the
 * Linux bridge agent enslaves it into the network's brq<network> bridge), the
 * folder the DHCP agent's namespaces are mounted in (a shared mount point, so
 * Docker accepts a `:shared` bind of it), and the cleanup that removes every
 * bridge, veth, tap, namespace, iptables and ebtables rule the run made. Rules and chains are found by Neutron's own
 * names (neutron-linuxbri-*, neutron-filter-top, neutronARP-*, neutronMAC-*)
 * and removed only when they were not there before the run.
 */
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './libvirt-e2e-harness.js';

/** The VMs' subnet: it exists only on the test's bridge (no address of the host is in it). */
export const NET_CIDR = '10.251.0.0/24';
/** The flat physnet of the sets (network.yaml's flat_networks, compute.yaml's bridge_mappings). */
export const PHYSNET = 'spcd-e2e';

const NEUTRON_IPT = /^(neutron-linuxbri-|neutron-openvswi-|neutron-filter-top$)/;
const NEUTRON_EBT = /^neutron(ARP|MAC)-/;
const IPT_TABLES = ['filter', 'raw', 'mangle', 'nat'] as const;
const TIMEOUT = 60_000;

export interface HostNet {
  /** The physnet's interface (the agent's physical_interface_mappings); its veth peer is `peer`. */
  readonly iface: string;
  readonly peer: string;
  readonly netnsDir: string;
  /** Neutron-named chains present before the run ("iptables/filter/name"): never removed. */
  readonly before: ReadonlySet<string>;
}

/** Every Neutron-named chain now, as "binary/table/name". */
async function neutronChains(): Promise<Set<string>> {
  const out = new Set<string>();
  for (const bin of ['iptables', 'ip6tables'])
    for (const t of IPT_TABLES) {
      const s = await run(`${bin}-save`, ['-t', t], TIMEOUT).catch(() => ({ stdout: '' }));
      for (const m of s.stdout.matchAll(/^:(\S+)/gm))
        if (NEUTRON_IPT.test(m[1]!)) out.add(`${bin}/${t}/${m[1]}`);
    }
  const e = await run('ebtables-save', [], TIMEOUT).catch(() => ({ stdout: '' }));
  let table = '';
  for (const line of e.stdout.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1);
    const m = /^:(\S+)/.exec(line);
    if (m && NEUTRON_EBT.test(m[1]!)) out.add(`ebtables/${table}/${m[1]}`);
  }
  return out;
}

/**
 * The run's physnet interface `iface` and its veth peer `peer` (no address,
 * IPv6 off on both so the host sends nothing; the peer stays down, so no frame
 * leaves through it), and the namespace folder.
 */
export async function hostNetworkUp(root: string, iface: string, peer: string): Promise<HostNet> {
  for (const n of [iface, peer])
    if (n.length > 15) throw new Error(`interface name ${n} is longer than 15 characters`);
  const before = await neutronChains();
  await run('ip', ['link', 'add', iface, 'type', 'veth', 'peer', 'name', peer], TIMEOUT);
  for (const n of [iface, peer]) {
    const v6 = `/proc/sys/net/ipv6/conf/${n}/disable_ipv6`;
    if (existsSync(v6)) writeFileSync(v6, '1');
  }
  const netnsDir = join(root, 'netns');
  await run('mount', ['--bind', netnsDir, netnsDir], TIMEOUT);
  await run('mount', ['--make-shared', netnsDir], TIMEOUT);
  return { iface, peer, netnsDir, before };
}

/** The bridge the Linux bridge agent makes for a network (and Nova names for its ports). */
export function brqOf(network: string): string {
  return `brq${network.slice(0, 11)}`;
}

/** Links of the host whose names start with `prefix`. */
async function links(prefix: string): Promise<string[]> {
  const s = await run('ip', ['-o', 'link', 'show'], TIMEOUT);
  return [...s.stdout.matchAll(/^\d+: ([^:@\s]+)/gm)].map((m) => m[1]!).filter((n) => n.startsWith(prefix));
}

/** Names of what the run's Neutron objects make on the host (Neutron's and Nova's: a prefix and the id's first 11 characters). */
export interface Made {
  /** Ports: their taps, and a hybrid plug's qbr bridge and qvb/qvo veth pair (Open vSwitch). */
  readonly ports: readonly string[];
  /** Networks: the brq<network> bridge os-vif makes for a server's port. */
  readonly networks: readonly string[];
}

/** The prefixes of the host devices a port or network makes: its tap, the hybrid plug's, a network's brq. */
const DEVICE_PREFIXES = ['tap', 'qbr', 'qvb', 'qvo', 'brq'] as const;

function devicesOf(m: Made): Set<string> {
  const ofPort = (id: string): string[] => ['tap', 'qbr', 'qvb', 'qvo'].map((p) => `${p}${id.slice(0, 11)}`);
  return new Set([...m.ports.flatMap(ofPort), ...m.networks.map(brqOf)]);
}

/** The host's devices with one of DEVICE_PREFIXES. */
async function portDevices(): Promise<string[]> {
  const out: string[] = [];
  for (const p of DEVICE_PREFIXES) out.push(...(await links(p)));
  return out;
}

/**
 * Removes what the run made: the devices of its ports and the brq bridges of
 * its networks (DEVICE_PREFIXES + the id's first 11 characters), the namespaces in its
 * folder, the folder's mount, its bridge, and Neutron's iptables and
 * ebtables chains that were not there before. Returns what it removed.
 */
export async function hostNetworkDown(h: HostNet, made: Made): Promise<string[]> {
  const removed: string[] = [];
  const devices = devicesOf(made);
  for (const dev of await portDevices())
    if (devices.has(dev)) {
      await run('ip', ['link', 'del', dev], TIMEOUT).catch(() => undefined);
      removed.push(dev);
    }
  if (existsSync(h.netnsDir)) {
    for (const ns of readdirSync(h.netnsDir)) {
      await run('umount', ['-l', join(h.netnsDir, ns)], TIMEOUT).catch(() => undefined);
      rmSync(join(h.netnsDir, ns), { force: true });
      removed.push(`netns:${ns}`);
    }
    await run('umount', ['-l', h.netnsDir], TIMEOUT).catch(() => undefined);
  }
  if ((await links(h.iface)).includes(h.iface)) {
    await run('ip', ['link', 'del', h.iface], TIMEOUT); // its peer goes with it
    removed.push(`${h.iface}+${h.peer}`);
  }
  removed.push(...(await removeChains(h.before, h.netnsDir)));
  return removed;
}

async function removeChains(before: ReadonlySet<string>, scratch: string): Promise<string[]> {
  const removed: string[] = [];
  const ours = [...(await neutronChains())].filter((c) => !before.has(c));
  for (const bin of ['iptables', 'ip6tables'])
    for (const t of IPT_TABLES) {
      const chains = ours.filter((c) => c.startsWith(`${bin}/${t}/`)).map((c) => c.split('/')[2]!);
      if (!chains.length) continue;
      const save = (await run(`${bin}-save`, ['-t', t], TIMEOUT)).stdout.split('\n');
      const jumps = save.filter((l) => {
        const m = /^-A (\S+) .*-j (\S+)/.exec(l);
        return m && !chains.includes(m[1]!) && chains.includes(m[2]!);
      });
      const script = [
        `*${t}`,
        ...jumps.map((l) => l.replace(/^-A /, '-D ')),
        ...chains.map((c) => `-F ${c}`),
        ...chains.map((c) => `-X ${c}`),
        'COMMIT',
        '',
      ].join('\n');
      const file = `${scratch}.${bin}-${t}.restore`;
      writeFileSync(file, script);
      try {
        await run(`${bin}-restore`, ['-n', file], TIMEOUT);
      } finally {
        rmSync(file, { force: true });
      }
      removed.push(...jumps.map((j) => `${bin}/${t}: ${j}`), ...chains.map((c) => `${bin}/${t}/${c}`));
    }
  const ebt = ours.filter((c) => c.startsWith('ebtables/'));
  for (const c of ebt) {
    const [, table, chain] = c.split('/') as [string, string, string];
    const save = (await run('ebtables-save', [], TIMEOUT)).stdout.split('\n');
    let cur = '';
    for (const l of save) {
      if (l.startsWith('*')) cur = l.slice(1);
      const m = /^-A (\S+) (.*)$/.exec(l);
      if (cur === table && m && !NEUTRON_EBT.test(m[1]!) && l.endsWith(`-j ${chain}`))
        await run('ebtables', ['-t', table, '-D', m[1]!, ...m[2]!.split(/\s+/)], TIMEOUT);
    }
    await run('ebtables', ['-t', table, '-F', chain], TIMEOUT).catch(() => undefined);
  }
  for (const c of ebt) {
    const [, table, chain] = c.split('/') as [string, string, string];
    await run('ebtables', ['-t', table, '-X', chain], TIMEOUT).catch(() => undefined);
    removed.push(c);
  }
  return removed;
}

/** What is left of the run's network on the host (empty after a clean teardown). */
export async function hostNetworkLeft(h: HostNet, made: Made): Promise<string[]> {
  const devices = devicesOf(made);
  const left = (await portDevices()).filter((d) => devices.has(d));
  for (const n of [h.iface, h.peer]) if ((await links(n)).includes(n)) left.push(n);
  if (existsSync(h.netnsDir)) left.push(...readdirSync(h.netnsDir).map((n) => `netns:${n}`));
  left.push(...[...(await neutronChains())].filter((c) => !h.before.has(c)));
  return left;
}
