/**
 * The shipped Open vSwitch containers (container-sets/compute.yaml:
 * openvswitch_db, openvswitch_vswitchd, neutron_openvswitch_agent) under a real spcd on the real
 * engine, on a host without the openvswitch kernel module: the userspace
 * datapath chosen by the per-host values (test/support/ovs-node.ts,
 * docs/how-to/openvswitch-host.md).
 *
 *  1. vswitchd runs with the netdev datapath; OVSDB answers on its unix
 *     socket only, root:kolla 0770 (Kolla's service users open it).
 *  2. The bridge that neutron.ovs.bridge_mappings names exists (vswitchd's
 *     bootstrap task), netdev, with its physical port, and survives a restart
 *     of openvswitch_db.
 *  3. neutron_openvswitch_agent, as neutron (Kolla's image user), with no control plane (RabbitMQ's address is
 *     a closed loopback port), gets as far as its local pieces: the
 *     integration bridge (netdev), the patch ports to the physnet's bridge,
 *     its OpenFlow connection and its flows (the canary among them).
 *  4. An spcd upgrade of openvswitch_vswitchd while two namespaces ping each
 *     other every 10 ms through a bridge of the test's (secure fail mode, two
 *     flows): the flows are saved at the stop and back before forwarding
 *     resumes (other_config:flow-restore-wait), the agent's as well; the lost
 *     packets, the longest gap and vswitchd's own stop + start are printed:
 *     `vswitchd_upgrade_lost=V vswitchd_window_ms=W vswitchd_restart_ms=R`.
 * Setup builds or reuses the image (scripts/openvswitch/build-images.sh).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { EventTap, SpcdApi } from '../e2e/libvirt-e2e-harness.js';
import { NsPinger } from '../e2e/ns-ping.js';
import { logsOf } from '../support/containers.js';
import { REPO, sandbox, SpcdProcess } from '../support/daemon.js';
import {
  buildOvsImages,
  makePair,
  OVS_NEXT_IMAGE,
  tearDownOvs,
  sh,
  startOvsLine,
  writeOvsNode,
  type OvsNode,
  waitRunning,
  operation as opVia,
} from '../support/ovs-node.js';
import { waitFor } from '../support/wait.js';

const BUILD_TIMEOUT_MS = 45 * 60_000;
const sb = sandbox('ovs');
const id = randomBytes(2).toString('hex');
const bridge = `spx${id}`;
let pair: ReturnType<typeof makePair> | undefined;
let node: OvsNode;
let spcd: SpcdProcess | undefined;
let tap: EventTap | undefined;
const api = new SpcdApi(sb.socket);
const operation = (path: string, body: object, timeoutMs: number): Promise<Record<string, unknown>> =>
  opVia(api, tap!, path, body, timeoutMs);

beforeAll(async () => {
  await buildOvsImages(BUILD_TIMEOUT_MS);
  pair = makePair(id, 200 + (parseInt(id, 16) % 50));
  node = writeOvsNode(sb, `ovs${id}_`, {
    bridges: { physnet1: bridge },
    ports: { [bridge]: pair.phys },
    intBridge: `spi${id}`,
  });
  spcd = SpcdProcess.start(sb, [
    '--templates',
    join(REPO, 'templates'),
    '--overrides',
    node.overridesFile,
    '--secrets',
    node.secretsFile,
  ]);
  await spcd.readyOrExit(300_000);
  tap = await EventTap.open(sb.socket);
  await waitRunning(api, spcd, [node.db, node.vswitchd, node.agent]);
}, BUILD_TIMEOUT_MS + 360_000);

afterAll(async () => {
  tap?.close();
  await tearDownOvs({
    vswitchd: node?.vswitchd,
    bridges: [bridge, node.intBridge, `spp${id}`],
    spcd,
    sb,
    volumes: node?.volumes ?? [],
    pair,
  });
}, 180_000);

const vsctl = (...args: string[]): Promise<string> =>
  sh(node.vswitchd, ['ovs-vsctl', '--timeout=10', ...args]);

describe('the shipped Open vSwitch containers on the userspace datapath', () => {
  inOrder();
  it("runs vswitchd with the netdev datapath, OVSDB on its unix socket only, open to Kolla's users", async () => {
    const version = await waitFor('ovs-appctl version', () => sh(node.vswitchd, ['ovs-appctl', 'version']), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    expect(version).toMatch(/ovs-vswitchd \(Open vSwitch\) 3\.1/);
    const dpif = await sh(node.vswitchd, ['ovs-appctl', 'dpif/show']);
    expect(dpif).toMatch(/^netdev@ovs-netdev:/m);
    expect(dpif).not.toMatch(/^system@/m);
    // ovsdb-server's remotes: the unix socket and the database's manager_options, no TCP.
    const remotes = await sh(node.db, ['ovs-appctl', '-t', 'ovsdb-server', 'ovsdb-server/list-remotes']);
    expect(remotes).toContain('punix:/run/openvswitch/db.sock');
    expect(remotes).not.toMatch(/ptcp:/);
    // Open to root and Kolla's kolla group (the agent's neutron, nova-compute's nova), to no one else.
    expect(await sh(node.db, ['stat', '-c', '%u:%g %a', '/run/openvswitch/db.sock'])).toBe('0:42400 770');
    expect(await sh(node.agent, ['id', '-un'])).toBe('neutron');
  });

  it('makes the bridge of bridge_mappings, netdev, with its port; it survives a restart of openvswitch_db', async () => {
    expect(await vsctl('get', 'Bridge', bridge, 'datapath_type')).toBe('netdev');
    expect((await vsctl('list-ports', bridge)).split('\n')).toContain(pair!.phys);
    const before = await api.container(node.db);
    await operation(`/v1/containers/${node.db}/restart`, { expectedGeneration: before.generation }, 120_000);
    // vswitchd reconnects to the new ovsdb-server; the bridge is in the database (its volume).
    await waitFor('vswitchd back on the restarted database', () => vsctl('show').then(() => true), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    expect(await vsctl('get', 'Bridge', bridge, 'datapath_type')).toBe('netdev');
    expect((await vsctl('list-ports', bridge)).split('\n')).toContain(pair!.phys);
    expect(await sh(node.vswitchd, ['ovs-appctl', 'dpif/show'])).toContain(`${bridge}:`);
  }, 240_000);

  it("runs the agent up to its local pieces: the integration bridge, netdev, patched to the physnet's bridge, its OpenFlow connection", async () => {
    const br = node.intBridge;
    await waitFor(
      'the agent to patch the bridges',
      async () => (await vsctl('list-ports', bridge)).split('\n').includes(`phy-${bridge}`),
      { timeoutMs: 240_000, intervalMs: 1000 },
    );
    expect(await vsctl('get', 'Bridge', br, 'datapath_type')).toBe('netdev');
    expect((await vsctl('list-ports', br)).split('\n')).toContain(`int-${bridge}`);
    expect(await vsctl('get-controller', br)).toBe('tcp:127.0.0.1:6633');
    // One Controller row per bridge the agent manages, each connected.
    await waitFor(
      'the agent on its OpenFlow connection',
      async () => {
        const rows = (
          await vsctl('--bare', '--columns=is_connected', 'find', 'Controller', 'target="tcp:127.0.0.1:6633"')
        )
          .split('\n')
          .filter((l) => l.trim());
        return rows.length >= 2 && rows.every((l) => l.trim() === 'true');
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // Neutron's canary flow, by which the agent tells a restarted vswitchd.
    expect(await sh(node.vswitchd, ['ovs-ofctl', 'dump-flows', br, 'table=23'])).toMatch(
      /table=23.*actions=drop/,
    );
    // Without a control plane it stops at RabbitMQ (a closed port), and keeps trying.
    await waitFor(
      'the agent retrying RabbitMQ',
      async () => /impl_rabbit.*Connection failed: .*ECONNREFUSED/.test(await logsOf(node.agent)),
      {
        timeoutMs: 120_000,
        intervalMs: 1000,
      },
    );
    expect((await api.container(node.agent)).state).toBe('running');
  }, 300_000);

  it('upgrades vswitchd with the flows saved and restored: the lost packets, window and restart time', async () => {
    // The test's own bridge (the agent manages the physnet's): secure, two flows.
    const pb = `spp${id}`;
    await vsctl(
      ...['add-br', pb, '--', 'set', 'Bridge', pb, 'datapath_type=netdev', 'fail_mode=secure', '--'],
      ...['add-port', pb, pair!.hostA, '--', 'set', 'Interface', pair!.hostA, 'ofport_request=1', '--'],
      ...['add-port', pb, pair!.hostB, '--', 'set', 'Interface', pair!.hostB, 'ofport_request=2'],
    );
    await sh(node.vswitchd, ['ovs-ofctl', 'add-flow', pb, 'in_port=1,actions=output:2']);
    await sh(node.vswitchd, ['ovs-ofctl', 'add-flow', pb, 'in_port=2,actions=output:1']);
    const pinger = NsPinger.start(`/run/netns/${pair!.nsA}`, [pair!.ipB], { intervalS: 0.01 });
    try {
      await pinger.waitReplyAfter(Date.now() / 1000, 30_000);
      const before = await api.container(node.vswitchd);
      const from = Date.now() / 1000;
      await operation(
        `/v1/containers/${node.vswitchd}/upgrade`,
        { image: OVS_NEXT_IMAGE, expectedGeneration: before.generation },
        300_000,
      );
      const to = Date.now() / 1000;
      await pinger.waitReplyAfter(to + 1, 60_000);
      await pinger.stop();
      const [d] = pinger.directions([{ name: 'upgrade', from, to }]);
      // vswitchd's own restart: its exit after the flows were saved, plus the new one's start to forwarding.
      const saved = await startOvsLine(node.vswitchd, 'saved');
      const stopped = await startOvsLine(node.vswitchd, 'stopped');
      const started = await startOvsLine(node.vswitchd, 'forwarding');
      const restartMs = stopped.ms! - saved.ms! + started.ms!;
      // From the old start-ovs's exit to the new one's vswitchd: spcd, the engine and kolla_start.
      const betweenMs = started.started_at! - stopped.at!;
      console.log(
        `network=ovs vswitchd_upgrade_lost=${d!.lost} vswitchd_window_ms=${Math.round(d!.maxGapMs)} vswitchd_restart_ms=${restartMs} ` +
          `ping_sent=${d!.sent} ping_interval_ms=10 flows_save_ms=${saved.ms} vswitchd_stop_ms=${stopped.ms! - saved.ms!} ` +
          `vswitchd_start_ms=${started.ms} between_containers_ms=${betweenMs}`,
      );
      expect((await api.container(node.vswitchd)).image).toBe(OVS_NEXT_IMAGE);
      // The flows came back with the new vswitchd, and forwarding resumed on them.
      const flows = await sh(node.vswitchd, ['ovs-ofctl', 'dump-flows', '--no-stats', pb]);
      expect(flows).toMatch(/in_port=1 actions=output:2/);
      expect(flows).toMatch(/in_port=2 actions=output:1/);
      expect(await vsctl('get', 'Open_vSwitch', '.', 'other_config')).not.toContain('flow-restore-wait');
      // The agent's flows came back too: its canary is there, so it sees no restart to recover from.
      expect(await sh(node.vswitchd, ['ovs-ofctl', 'dump-flows', node.intBridge, 'table=23'])).toMatch(
        /actions=drop/,
      );
      expect(d!.lossesByWindow.outside).toBe(0);
      expect(d!.ok).toBeGreaterThan(0);
    } finally {
      await pinger.stop();
    }
  }, 600_000);
});
