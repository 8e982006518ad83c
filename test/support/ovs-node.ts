import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { execIn } from './containers.js';
import { REPO, type Sandbox } from './daemon.js';
import { docker } from './docker.js';

/**
 * The Open vSwitch containers of the shipped compute set
 * (container-sets/compute.yaml, its `neutron` subset: openvswitch_db,
 * openvswitch_vswitchd, neutron_openvswitch_agent) as a test runs them on
 * this machine: the definitions as shipped, each container renamed with the
 * test's prefix (several tests share one engine), with a per-host override
 * file such as an operator writes for a host without the openvswitch kernel
 * module and without --privileged (docs/how-to/openvswitch-host.md):
 * spcd-e2e/openvswitch:zed, explicit capabilities, the userspace datapath,
 * KOLLA_SKIP_EXTEND_START for vswitchd (no `modprobe openvswitch`), and the
 * test's own /run/openvswitch folder and named volumes. No control plane: the
 * agent's RabbitMQ address is a closed loopback port, so the agent gets as
 * far as its local pieces (the integration bridge, the physical bridges'
 * patch ports, its OpenFlow connection) and then keeps retrying RabbitMQ.
 */
export const OVS_IMAGE = 'spcd-e2e/openvswitch:zed';
export const OVS_NEXT_IMAGE = 'spcd-e2e/openvswitch:zed-next';

export interface OvsNode {
  /** Container name of each shipped container: db, vswitchd. */
  readonly db: string;
  readonly vswitchd: string;
  readonly agent: string;
  /** The agent's integration bridge (Neutron's br-int, named by the test). */
  readonly intBridge: string;
  /** The test's /run/openvswitch on the host. */
  readonly runDir: string;
  readonly volumes: readonly string[];
  readonly overridesFile: string;
  readonly secretsFile: string;
}

interface SetFile {
  set: string;
  description: string;
  defaults: Record<string, unknown>;
  sets: Record<string, { description: string; containers: Record<string, Record<string, unknown>> }>;
}

/**
 * Writes the set, the overrides and the secrets; `bridges` is
 * neutron.ovs.bridge_mappings, `ports` openvswitch.bridge_ports, `intBridge`
 * the agent's integration bridge.
 */
export function writeOvsNode(
  sb: Sandbox,
  prefix: string,
  net: { bridges: Record<string, string>; ports: Record<string, string>; intBridge: string },
): OvsNode {
  const { bridges, ports, intBridge } = net;
  const shipped = yaml.load(readFileSync(join(REPO, 'container-sets', 'compute.yaml'), 'utf8')) as SetFile;
  const neutron = shipped.sets.neutron!;
  const keep = ['openvswitch_db', 'openvswitch_vswitchd', 'neutron_openvswitch_agent'];
  const containers: Record<string, Record<string, unknown>> = {};
  for (const name of keep) {
    const c = { ...neutron.containers[name]! };
    if (Array.isArray(c.depends_on)) c.depends_on = (c.depends_on as string[]).map((d) => prefix + d);
    containers[prefix + name] = c;
  }
  const set: SetFile = {
    set: shipped.set,
    description: shipped.description,
    defaults: shipped.defaults,
    sets: { neutron: { description: neutron.description, containers } },
  };
  writeFileSync(join(sb.setsDir, 'compute.yaml'), yaml.dump(set, { lineWidth: 200, noRefs: true }));
  const runDir = join(sb.root, 'run-openvswitch');
  mkdirSync(runDir, { recursive: true });
  const logs = `${prefix}kolla_logs`;
  const dbVolume = `${prefix}openvswitch_db`;
  const common = [
    '/etc/localtime:/etc/localtime:ro',
    '/lib/modules:/lib/modules:ro',
    `${runDir}:/run/openvswitch:shared`,
    `${logs}:/var/log/kolla`,
  ];
  const overrides = {
    containers: {
      [`${prefix}openvswitch_db`]: {
        image: OVS_IMAGE,
        binds: [...common, `${dbVolume}:/var/lib/openvswitch`],
      },
      [`${prefix}openvswitch_vswitchd`]: {
        image: OVS_IMAGE,
        privileged: false,
        cap_add: ['ALL'],
        cap_drop: ['SYS_RESOURCE'],
        devices: ['/dev/net/tun'],
        binds: common,
        environment: { KOLLA_SKIP_EXTEND_START: 'true' },
      },
      [`${prefix}neutron_openvswitch_agent`]: {
        image: OVS_IMAGE,
        privileged: false,
        cap_add: ['NET_ADMIN', 'SYS_ADMIN', 'DAC_READ_SEARCH', 'SYS_PTRACE'],
        // As Kolla's image runs it (its USER; this image has none): kolla_start
        // runs kolla_set_configs through sudo, the agent as neutron (kolla group).
        user: 'neutron',
        binds: common,
      },
    },
    values: {
      host_name: `${prefix.replace(/_/g, '-')}compute`,
      // Port 9 on loopback: nothing listens (no control plane in this test).
      rabbitmq: { user: 'guest', hosts: ['127.0.0.1'], port: 9 },
      neutron: {
        agent: { tunnel_types: [], l2_population: false },
        ovs: { datapath_type: 'netdev', bridge_mappings: bridges, integration_bridge: intBridge },
      },
      openvswitch: { bridge_ports: ports },
    },
  };
  const overridesFile = join(sb.root, 'overrides.yaml');
  writeFileSync(overridesFile, yaml.dump(overrides, { noRefs: true }));
  const secretsFile = join(sb.root, 'secrets.yaml');
  writeFileSync(
    secretsFile,
    yaml.dump({ rabbitmq: { password: 'guest' }, neutron: { keystone_password: 'unused' } }),
    {
      mode: 0o600,
    },
  );
  return {
    db: `${prefix}openvswitch_db`,
    vswitchd: `${prefix}openvswitch_vswitchd`,
    agent: `${prefix}neutron_openvswitch_agent`,
    intBridge,
    secretsFile,
    runDir,
    volumes: [logs, dbVolume],
    overridesFile,
  };
}

/** Runs a command in a container by name; throws with its output unless it exits 0. */
export async function sh(container: string, cmd: string[], timeoutMs = 30_000): Promise<string> {
  const r = await execIn(container, cmd, { timeoutMs });
  if (r.exitCode !== 0)
    throw new Error(`${cmd.join(' ')} in ${container} exited ${r.exitCode}: ${r.stdout}${r.stderr}`);
  return r.stdout.trim();
}

/** Removes the test's named volumes (after its containers). */
export async function removeVolumes(names: readonly string[]): Promise<void> {
  for (const n of names)
    await docker()
      .getVolume(n)
      .remove()
      .catch(() => undefined);
}

/** `ip` on the host, for the test's namespaces and veth pairs. */
export function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
}

/**
 * Two network namespaces, each with one end of a veth pair whose other end
 * stays on the host for an OVS bridge to take as a port: `hostA`/`hostB`,
 * addresses 10.254.<net>.1 and .2/24, and a third pair `phys` for a
 * physical bridge's port. Nothing routes them anywhere else.
 */
export function makePair(
  id: string,
  net: number,
): {
  nsA: string;
  nsB: string;
  hostA: string;
  hostB: string;
  ipA: string;
  ipB: string;
  phys: string;
  remove: () => void;
} {
  const nsA = `spcd-ovs-${id}-a`;
  const nsB = `spcd-ovs-${id}-b`;
  const hostA = `spa${id}`;
  const hostB = `spb${id}`;
  const ipA = `10.254.${net}.1`;
  const ipB = `10.254.${net}.2`;
  for (const [ns, host, addr] of [
    [nsA, hostA, ipA],
    [nsB, hostB, ipB],
  ] as const) {
    ip('netns', 'add', ns);
    ip('link', 'add', host, 'type', 'veth', 'peer', 'name', `${host}n`);
    ip('link', 'set', `${host}n`, 'netns', ns);
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    ip('-n', ns, 'addr', 'add', `${addr}/24`, 'dev', `${host}n`);
    ip('-n', ns, 'link', 'set', `${host}n`, 'up');
    ip('link', 'set', host, 'up');
  }
  // The physnet bridge's port: one more veth pair, its peer in the first namespace (no address).
  const phys = `spc${id}`;
  ip('link', 'add', phys, 'type', 'veth', 'peer', 'name', `${phys}n`);
  ip('link', 'set', `${phys}n`, 'netns', nsA);
  ip('link', 'set', phys, 'up');
  const remove = (): void => {
    for (const ns of [nsA, nsB]) {
      try {
        ip('netns', 'del', ns);
      } catch {
        // already gone
      }
    }
  };
  return { nsA, nsB, hostA, hostB, ipA, ipB, phys, remove };
}
