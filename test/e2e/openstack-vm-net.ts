/**
 * The VMs' side of the OpenStack end-to-end test's network (issue #15,
 * docs/explanation/openstack-network.md): the boot of a server on a port, the check of the
 * network as Neutron and the host see it, and its removal at the end. The
 * host's side (veth, namespaces folder, chains) is test/e2e/openstack-network.ts.
 */
import { writeFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { waitFor } from '../support/wait.js';
import { run } from './libvirt-e2e-harness.js';
import type { OpenStack, Port } from './openstack-client.js';
import { brqOf, type HostNet } from './openstack-network.js';

/** The e2e guest's files (scripts/libvirt/build-guest.sh). */
export const GUEST_DIR = '/var/cache/spcd-e2e/guest';

/**
 * Uploads the tiny guest to Glance: kernel (aki), ramdisk (ari), and a 1 MiB
 * raw root (written at `rootImg`) naming both and the kernel command line.
 * Every image id is pushed to `made` as soon as it exists; returns the root's.
 */
export async function uploadGuest(
  os: OpenStack,
  prefix: string,
  rootImg: string,
  cmdline: string,
  made: string[],
): Promise<string> {
  writeFileSync(rootImg, Buffer.alloc(1 << 20));
  const aki = await os.uploadImage(
    { name: `${prefix}-kernel`, disk_format: 'aki', container_format: 'aki' },
    `${GUEST_DIR}/vmlinuz`,
  );
  made.push(aki);
  const ari = await os.uploadImage(
    { name: `${prefix}-ramdisk`, disk_format: 'ari', container_format: 'ari' },
    `${GUEST_DIR}/initrd.img`,
  );
  made.push(ari);
  const image = await os.uploadImage(
    {
      name: `${prefix}-guest`,
      disk_format: 'raw',
      container_format: 'bare',
      kernel_id: aki,
      ramdisk_id: ari,
      os_command_line: cmdline,
    },
    rootImg,
  );
  made.push(image);
  return image;
}

/**
 * Boots a server on `port` and waits for ACTIVE. The scheduler maps a new
 * compute host to its cell by a periodic discovery (every 10 s); a boot
 * before that ends in ERROR "Host ... is not mapped to any cell". A compute
 * host just rebuilt (the kolla-ansible host of the adoption variant) reports
 * `up` before its resources reach Placement; a boot meanwhile ends in ERROR
 * "No valid host was found" (no allocation candidates). Either way that
 * server is deleted (the port, made before, stays) and the boot asked again,
 * until the deadline.
 */
export async function bootActive(
  os: OpenStack,
  name: string,
  image: string,
  flavor: string,
  port: string,
): Promise<string> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const id = await os.boot(name, image, flavor, { port });
    const s = await waitFor(
      `server ${name} ACTIVE or ERROR`,
      async () => {
        const x = await os.server(id);
        return (x?.status === 'ACTIVE' || x?.status === 'ERROR') && x;
      },
      { timeoutMs: 600_000, intervalMs: 2000 },
    );
    if (s.status === 'ACTIVE') return id;
    await os.deleteServer(id);
    if (
      !/not mapped to any cell|No valid host was found/.test(s.fault?.message ?? '') ||
      Date.now() > deadline
    )
      throw new Error(`server ${name} went to ERROR: ${JSON.stringify(s.fault)}`);
    console.log(`server ${name}: ${s.fault?.message}; booting again`);
    await waitFor(
      "Nova to forget the failed server's port binding",
      async () => {
        const p = await os.ports(`id=${port}`);
        return !p[0]?.device_id && true;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
  }
}

export async function readdirAsync(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}

/** Where a network's ports are plugged on the host, as one L2 variant sees it. */
export interface L2View {
  /** The physnet's interface is on the network's bridge. */
  readonly uplinkOk: boolean;
  /** A port's device (tap, or qvo of a hybrid plug) is on the bridge its agent serves. */
  readonly plugged: (p: Port) => boolean;
  /** `bridge=... on_bridge=...` for the step's line. */
  readonly line: string;
}

export interface NetCheckContext {
  readonly os: OpenStack;
  readonly network: string;
  readonly hostNet: HostNet;
  /** The VMs' server ids (none yet: every compute port counts). */
  readonly serverIds: readonly string[];
  readonly vms: number;
  /** The DHCP agent's container. */
  readonly dhcpAgent: string;
  /** Every port id seen is added here (their taps are removed at the end). */
  readonly portIds: Set<string>;
  /** The host's side of the variant (the Linux bridge's brq, or Open vSwitch's bridges). */
  readonly l2: (network: string) => Promise<L2View>;
}

/** The Linux bridge variant: the network's brq bridge holds the physnet's veth and every port's tap. */
export async function linuxBridgeL2(iface: string, network: string): Promise<L2View> {
  const bridge = brqOf(network);
  const bridged = new Set(await readdirAsync(`/sys/class/net/${bridge}/brif`));
  return {
    uplinkOk: bridged.has(iface),
    plugged: (p) => bridged.has(`tap${p.id.slice(0, 11)}`),
    line: `bridge=${bridge} on_bridge=${[...bridged].sort().join(',')}`,
  };
}

/**
 * The network as Neutron and the host see it: the VMs' ports and the DHCP
 * port ACTIVE, each port plugged and the physnet's veth on its bridge (the
 * variant's `l2`), the qdhcp namespace in the run's folder, and dnsmasq's
 * hosts file (in the DHCP agent) naming each VM's MAC and address. The
 * leases dnsmasq handed out are counted (a guest with a DHCP client leaves
 * one each).
 */
export async function networkCheck(c: NetCheckContext): Promise<{ failures: string[]; line: string }> {
  const failures: string[] = [];
  const ports = await c.os.ports(`network_id=${c.network}`);
  for (const p of ports) c.portIds.add(p.id);
  const vmPorts = c.serverIds.length
    ? c.serverIds.map((id) => ports.find((p) => p.device_id === id))
    : ports.filter((p) => p.device_owner.startsWith('compute:'));
  const dhcp = ports.find((p) => p.device_owner === 'network:dhcp');
  if (vmPorts.length !== c.vms || vmPorts.some((p) => !p)) failures.push(`VM ports: ${vmPorts.length}`);
  if (!dhcp) failures.push('no DHCP port');
  const l2 = await c.l2(c.network);
  if (!l2.uplinkOk) failures.push(`${c.hostNet.iface} not on its bridge (${l2.line})`);
  for (const p of [...vmPorts, dhcp].filter((x): x is Port => !!x)) {
    if (p.status !== 'ACTIVE') failures.push(`port ${p.id} (${p.device_owner}) is ${p.status}`);
    if (!l2.plugged(p)) failures.push(`port ${p.id} not plugged (${l2.line})`);
  }
  const ns = `qdhcp-${c.network}`;
  if (!(await readdirAsync(c.hostNet.netnsDir)).includes(ns))
    failures.push(`no ${ns} in ${c.hostNet.netnsDir}`);
  const dir = `/var/lib/neutron/dhcp/${c.network}`;
  const files = await run(
    '/usr/bin/docker',
    ['exec', c.dhcpAgent, 'sh', '-c', `cat ${dir}/host; echo ---; cat ${dir}/leases 2>/dev/null || true`],
    60_000,
  ).catch((e: Error) => ({ stdout: `--- ${e.message}` }));
  const [hosts = '', leases = ''] = files.stdout.split('---\n');
  for (const p of vmPorts.filter((x): x is Port => !!x)) {
    const ip = p.fixed_ips[0]?.ip_address ?? '?';
    if (!hosts.includes(p.mac_address) || !hosts.includes(ip))
      failures.push(`dnsmasq's hosts lack ${p.mac_address} ${ip}`);
  }
  const leaseCount = leases.split('\n').filter((l) => l.trim()).length;
  const line =
    `network=${c.network} ports_active=${[...vmPorts, dhcp].filter((p) => p?.status === 'ACTIVE').length} ` +
    `addresses=${vmPorts.map((p) => p?.fixed_ips[0]?.ip_address).join(',')} dhcp_hosts=${hosts.split('\n').filter(Boolean).length} ` +
    `dhcp_leases=${leaseCount} ${l2.line}`;
  return { failures, line };
}

/**
 * The network check until it passes (every 2 s, up to `timeoutMs`): a
 * restarted Linux bridge agent asks Neutron for its ports' details again (ML2
 * sets them BUILD) and reports them up once its rules are in place. Returns
 * the passing check, or the last one at the deadline (a check that threw
 * counts as failing), and how long it took.
 */
export async function networkSettled(
  check: () => ReturnType<typeof networkCheck>,
  timeoutMs = 300_000,
): Promise<{ failures: string[]; line: string; afterS: number }> {
  const t0 = Date.now();
  // A check that throws (Neutron's API answering 500) is a failing check.
  const once = (): ReturnType<typeof networkCheck> =>
    check().catch((e: Error) => ({ failures: [e.message], line: `network check failed: ${e.message}` }));
  let c = await once();
  while (c.failures.length && Date.now() - t0 < timeoutMs) {
    await new Promise((r) => setTimeout(r, 2000));
    c = await once();
  }
  return { ...c, afterS: (Date.now() - t0) / 1000 };
}

/**
 * Deletes the run's ports and network once Nova released the ports (the
 * servers are being deleted), then waits for the agents to take down what
 * they made (the qdhcp namespace, the taps); what remains is removed by
 * hostNetworkDown.
 */
export async function deleteNetwork(
  os: OpenStack,
  network: string,
  ports: readonly string[],
  hostNet: HostNet | undefined,
): Promise<void> {
  const gone = (): Promise<boolean> =>
    os.ports(`network_id=${network}&device_owner=compute:nova`).then((p) => p.length === 0);
  await waitFor("the VMs' ports released", gone, { timeoutMs: 180_000, intervalMs: 2000 }).catch(() => false);
  for (const p of ports) await os.deletePort(p).catch((e: Error) => console.log(`port delete: ${e.message}`));
  await os.deleteNetwork(network).catch((e: Error) => console.log(`network delete: ${e.message}`));
  if (hostNet)
    await waitFor(
      'the DHCP agent to remove its namespace',
      async () => !(await readdirAsync(hostNet.netnsDir)).includes(`qdhcp-${network}`),
      { timeoutMs: 120_000, intervalMs: 2000 },
    ).catch(() => console.log(`qdhcp-${network} still there; the cleanup removes it`));
}

/** Where templates/neutron/ebtables-among-delete.j2 notes each rule it deleted by number. */
export const AMONG_DELETE_LOG = '/var/log/kolla/neutron/ebtables-among-delete.log';

/**
 * The `--among-src` rules the Linux bridge agent's ebtables wrapper deleted
 * by number in this agent container (its log is in the container, so a new
 * container starts at 0): each is a delete that ebtables-nft 1.8.9 refused.
 */
export async function amongDeletes(agent: string): Promise<string[]> {
  const r = await run(
    '/usr/bin/docker',
    ['exec', agent, 'sh', '-c', `cat ${AMONG_DELETE_LOG} 2>/dev/null || true`],
    60_000,
  );
  return r.stdout.split('\n').filter((l) => l.trim());
}

/** The revision of each port on `network` (Neutron bumps it on every change, its status too). */
export async function portRevisions(os: OpenStack, network: string): Promise<Map<string, number>> {
  const ports = await os.ports(`network_id=${network}`);
  return new Map(ports.map((p) => [p.id, p.revision_number ?? 0]));
}

/**
 * Waits until a new Linux bridge agent has set up again every port that was
 * on `network` before it started: the port's revision past `before` (ML2 sets
 * a port BUILD when an agent asks for its details) and the port ACTIVE again
 * (the agent reported it up, its rules in place). Returns the seconds it took.
 */
export async function waitPortsSetUpAgain(
  os: OpenStack,
  network: string,
  before: ReadonlyMap<string, number>,
  timeoutMs: number,
): Promise<number> {
  const t0 = Date.now();
  let last = '';
  await waitFor(
    'every port set up again by the new Linux bridge agent (revision bumped, ACTIVE)',
    async () => {
      const ports = await os.ports(`network_id=${network}`);
      const waiting = [...before].filter(([id, rev]) => {
        const p = ports.find((x) => x.id === id);
        return !p || (p.revision_number ?? 0) <= rev || p.status !== 'ACTIVE';
      });
      last = waiting.map(([id]) => `${id}:${ports.find((x) => x.id === id)?.status ?? 'gone'}`).join(',');
      return waiting.length === 0;
    },
    { timeoutMs, intervalMs: 1000 },
  ).catch((e: Error) => {
    throw new Error(`${e.message}; still waiting: ${last}`);
  });
  return (Date.now() - t0) / 1000;
}
