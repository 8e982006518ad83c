import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { execIn } from './containers.js';
import { run, type EventTap, type SpcdApi } from '../e2e/libvirt-e2e-harness.js';
import { REPO, type Sandbox, type SpcdProcess } from './daemon.js';
import { cleanupInstance, docker } from './docker.js';
import { waitFor } from './wait.js';

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

/** The parts of a set file the tests rewrite. */
export interface SetFile {
  set: string;
  description: string;
  defaults: Record<string, unknown>;
  sets: Record<string, { description: string; containers: Record<string, Record<string, unknown>> }>;
}

/**
 * One subset of a shipped compute set as a set file of its own: the named
 * containers (all when `keep` is undefined), each renamed with `prefix`,
 * their dependencies too.
 */
export function shippedSubset(
  file: string,
  subset: string,
  prefix: string,
  keep?: readonly string[],
): string {
  const shipped = yaml.load(readFileSync(join(REPO, 'container-sets', file), 'utf8')) as SetFile;
  const sub = shipped.sets[subset]!;
  const containers: Record<string, Record<string, unknown>> = {};
  for (const name of keep ?? Object.keys(sub.containers)) {
    const c = { ...sub.containers[name]! };
    if (Array.isArray(c.depends_on)) c.depends_on = (c.depends_on as string[]).map((d) => prefix + d);
    containers[prefix + name] = c;
  }
  const set: SetFile = {
    set: shipped.set,
    description: shipped.description,
    defaults: shipped.defaults,
    sets: { [subset]: { description: sub.description, containers } },
  };
  return yaml.dump(set, { lineWidth: 200, noRefs: true });
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
  const keep = ['openvswitch_db', 'openvswitch_vswitchd', 'neutron_openvswitch_agent'];
  writeFileSync(join(sb.setsDir, 'compute.yaml'), shippedSubset('compute.yaml', 'neutron', prefix, keep));
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
      ...ovsdbAndVswitchd(prefix, common, dbVolume),
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

/**
 * The overrides of openvswitch_db and openvswitch_vswitchd on this machine:
 * the test's image and binds (`common`, plus the database's volume), no
 * --privileged but every capability save SYS_RESOURCE and the TUN device,
 * and no `modprobe openvswitch` (the userspace datapath).
 */
export function ovsdbAndVswitchd(
  prefix: string,
  common: readonly string[],
  dbVolume: string,
): Record<string, Record<string, unknown>> {
  return {
    [`${prefix}openvswitch_db`]: { image: OVS_IMAGE, binds: [...common, `${dbVolume}:/var/lib/openvswitch`] },
    [`${prefix}openvswitch_vswitchd`]: {
      image: OVS_IMAGE,
      privileged: false,
      cap_add: ['ALL'],
      cap_drop: ['SYS_RESOURCE'],
      devices: ['/dev/net/tun'],
      binds: [...common],
      environment: { KOLLA_SKIP_EXTEND_START: 'true' },
    },
  };
}

/**
 * After a test of the Open vSwitch containers: its bridges deleted (the
 * userspace datapath's bridge ports are TAP devices on the host: gone with
 * them), spcd stopped, its containers, named volumes, namespaces and
 * sandbox removed.
 */
export async function tearDownOvs(t: {
  vswitchd?: string;
  bridges: readonly string[];
  spcd?: SpcdProcess;
  sb: Sandbox;
  volumes: readonly string[];
  pair?: { remove: () => void };
}): Promise<void> {
  if (t.vswitchd)
    for (const br of t.bridges)
      await sh(t.vswitchd, ['ovs-vsctl', '--timeout=10', '--if-exists', 'del-br', br]).catch(() => undefined);
  await t.spcd?.stop();
  await cleanupInstance(t.sb.instance);
  // The userspace datapath's bridge devices are persistent taps in the host's namespace: one that
  // outlived its del-br (ovn-controller makes its integration bridge again) stays after vswitchd.
  for (const br of t.bridges) await run('ip', ['link', 'del', br], 10_000).catch(() => undefined);
  await removeVolumes(t.volumes);
  t.pair?.remove();
  rmSync(t.sb.root, { recursive: true, force: true });
}

/** An operation through spcd's API, followed on its event stream to success (else throws its error). */
export async function operation(
  api: SpcdApi,
  tap: EventTap,
  path: string,
  body: object,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const op = await api.post(path, body);
  const fin = await tap.finished(op, timeoutMs);
  if (fin.phase !== 'succeeded') throw new Error(`${path}: ${JSON.stringify(fin.error)}`);
  return (fin.result ?? {}) as Record<string, unknown>;
}

/** Builds (or finds cached) the Open vSwitch image and its upgrade target. */
export async function buildOvsImages(timeoutMs: number): Promise<void> {
  try {
    await run('bash', [join(REPO, 'scripts/openvswitch/build-images.sh')], timeoutMs);
    await run(
      'bash',
      [join(REPO, 'scripts/openstack/build-next-image.sh'), OVS_IMAGE, OVS_NEXT_IMAGE],
      120_000,
    );
  } catch (err) {
    throw new Error(
      `cannot build ${OVS_IMAGE} (see /var/cache/spcd-e2e/logs/openvswitch-zed.log): ${(err as Error).message}`,
    );
  }
}

/** Waits until spcd reports each container running; on a timeout, spcd's last warnings and errors. */
export async function waitRunning(api: SpcdApi, spcd: SpcdProcess, names: readonly string[]): Promise<void> {
  for (const name of names)
    await waitFor(`${name} running`, async () => (await api.container(name)).state === 'running', {
      timeoutMs: 180_000,
      intervalMs: 500,
    }).catch((err: Error) => {
      const problems = spcd.output.filter((l) => /"level":(40|50)/.test(l)).slice(-10);
      throw new Error(`${err.message}\n${problems.join('\n')}`);
    });
}

/** Runs a command in a container by name; throws with its output unless it exits 0. */
export async function sh(container: string, cmd: string[], timeoutMs = 30_000): Promise<string> {
  const r = await execIn(container, cmd, { timeoutMs });
  if (r.exitCode !== 0)
    throw new Error(`${cmd.join(' ')} in ${container} exited ${r.exitCode}: ${r.stdout}${r.stderr}`);
  return r.stdout.trim();
}

/**
 * The numbers (key=N) of the last `start-ovs: <what> ...` line that vswitchd's
 * start script (templates/openvswitch/start-ovs.j2) logged in the container.
 */
export async function startOvsLine(vswitchd: string, what: string): Promise<Record<string, number>> {
  const text = await sh(vswitchd, ['cat', '/var/log/kolla/openvswitch/start-ovs.log']);
  const lines = text.split('\n').filter((l) => l.startsWith(`start-ovs: ${what}`));
  if (lines.length === 0) throw new Error(`no '${what}' line in start-ovs.log:\n${text}`);
  return Object.fromEntries(
    [...lines[lines.length - 1]!.matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]),
  );
}

/**
 * vswitchd's own restart in its last upgrade, from its start script's log
 * (templates/openvswitch/start-ovs.j2): the old one's exit after its flows
 * were saved, plus the new one's start until it forwards.
 */
export async function vswitchdRestartMs(vswitchd: string): Promise<number> {
  const saved = await startOvsLine(vswitchd, 'saved');
  const stopped = await startOvsLine(vswitchd, 'stopped');
  const started = await startOvsLine(vswitchd, 'forwarding');
  return stopped.ms! - saved.ms! + started.ms!;
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
