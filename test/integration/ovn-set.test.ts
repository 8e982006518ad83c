/**
 * The shipped OVN containers (container-sets/ovn/compute.yaml: openvswitch_db,
 * openvswitch_vswitchd, ovn_controller) and OVN's central services
 * (container-sets-e2e/openstack/ovn.yaml: ovn_nb_db, ovn_sb_db, ovn_northd)
 * under a real spcd on the real engine, on a host without the openvswitch
 * kernel module (the userspace datapath, test/support/ovn-node.ts). The test
 * writes a logical switch into the northbound database as Neutron's ML2/OVN
 * driver would, with two ports whose interfaces are veths into two network
 * namespaces, and the namespaces ping each other through the flows
 * ovn-controller installs.
 *
 *  1. ovn_controller's bootstrap task makes the integration bridge (secure,
 *     netdev) and the chassis's settings; ovn-controller registers the
 *     chassis in the southbound database (its name and hostname, geneve).
 *  2. The two ports are bound to the chassis and the namespaces ping.
 *  3. spcd restarts ovn_controller, then upgrades it, while the namespaces
 *     ping every 10 ms, until the chassis has caught up with the northbound
 *     database again: the flows stay in vswitchd while no controller runs,
 *     and the new one replaces them in one bundle once it has computed its
 *     own (ovn.ofctrl_wait_before_clear); the losses and longest gap are
 *     printed. The chassis keeps its name.
 *  4. spcd upgrades openvswitch_vswitchd under the same pings: the lost
 *     packets, the longest gap and vswitchd's own restart are printed:
 *     `network=ovn vswitchd_upgrade_lost=V vswitchd_window_ms=W vswitchd_restart_ms=R`.
 * Setup builds or reuses the image (scripts/openvswitch/build-images.sh).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { EventTap, SpcdApi } from '../e2e/libvirt-e2e-harness.js';
import { NsPinger } from '../e2e/ns-ping.js';
import { REPO, sandbox, SpcdProcess } from '../support/daemon.js';
import {
  buildOvsImages,
  ip,
  makePair,
  OVS_NEXT_IMAGE,
  sh,
  startOvsLine,
  tearDownOvs,
  waitRunning,
  operation as opVia,
} from '../support/ovs-node.js';
import { writeOvnNode, type OvnNode } from '../support/ovn-node.js';
import { waitFor } from '../support/wait.js';

const BUILD_TIMEOUT_MS = 45 * 60_000;
const sb = sandbox('ovn');
const id = randomBytes(2).toString('hex');
let pair: ReturnType<typeof makePair> | undefined;
let node: OvnNode;
let spcd: SpcdProcess | undefined;
let tap: EventTap | undefined;
const api = new SpcdApi(sb.socket);
const operation = (path: string, body: object, timeoutMs: number): Promise<Record<string, unknown>> =>
  opVia(api, tap!, path, body, timeoutMs);

beforeAll(async () => {
  await buildOvsImages(BUILD_TIMEOUT_MS);
  const net = 150 + (parseInt(id, 16) % 50);
  pair = makePair(id, net);
  node = writeOvnNode(sb, `ovn${id}_`, {
    bridges: { physnet1: `snp${id}` },
    ports: { [`snp${id}`]: pair.phys },
    intBridge: `sni${id}`,
    nbPort: 20_000 + 2 * (parseInt(id, 16) % 4000),
  });
  spcd = SpcdProcess.start(sb, ['--templates', join(REPO, 'templates'), '--overrides', node.overridesFile]);
  await spcd.readyOrExit(300_000);
  tap = await EventTap.open(sb.socket);
  await waitRunning(api, spcd, [node.nbDb, node.sbDb, node.northd, node.db, node.vswitchd, node.controller]);
}, BUILD_TIMEOUT_MS + 360_000);

afterAll(async () => {
  tap?.close();
  await tearDownOvs({
    vswitchd: node?.vswitchd,
    bridges: [node.intBridge, `snp${id}`],
    spcd,
    sb,
    volumes: node?.volumes ?? [],
    pair,
  });
}, 180_000);

const vsctl = (...args: string[]): Promise<string> =>
  sh(node.vswitchd, ['ovs-vsctl', '--timeout=10', ...args]);
/** A string column or map value, without the quotes OVSDB puts around some. */
const vsget = async (...args: string[]): Promise<string> =>
  (await vsctl('get', ...args)).replace(/^"(.*)"$/, '$1');
const sbctl = (...args: string[]): Promise<string> =>
  sh(node.sbDb, ['ovn-sbctl', `--db=${node.sb}`, '--timeout=10', ...args]);
const nbctl = (...args: string[]): Promise<string> =>
  sh(node.nbDb, ['ovn-nbctl', `--db=${node.nb}`, '--timeout=10', ...args]);

/**
 * A change through spcd while namespace A pings B every 10 ms, until the
 * chassis has caught up with the northbound database again: the window's
 * losses and longest gap.
 */
async function underPings(
  change: () => Promise<unknown>,
): Promise<{ lost: number; gapMs: number; sent: number }> {
  const pinger = NsPinger.start(`/run/netns/${pair!.nsA}`, [pair!.ipB], { intervalS: 0.01 });
  try {
    await pinger.waitReplyAfter(Date.now() / 1000, 30_000);
    const from = Date.now() / 1000;
    await change();
    // The window ends when the chassis has its flows from the (new) ovn-controller in place:
    // a restarted one replaces vswitchd's flows only after ovn.ofctrl_wait_before_clear.
    await nbctl('--wait=hv', '--timeout=60', 'sync');
    const to = Date.now() / 1000;
    await pinger.waitReplyAfter(to + 1, 60_000);
    await pinger.stop();
    const [d] = pinger.directions([{ name: 'change', from, to }]);
    expect(d!.lossesByWindow.outside).toBe(0);
    return { lost: d!.lost, gapMs: Math.round(d!.maxGapMs), sent: d!.sent };
  } finally {
    await pinger.stop();
  }
}

const chassisNames = async (): Promise<string[]> =>
  (await sbctl('--bare', '--columns=name', 'list', 'Chassis')).split('\n').filter(Boolean);

describe('the shipped OVN containers on the userspace datapath', () => {
  inOrder();
  it('makes the integration bridge and registers the chassis in the southbound database', async () => {
    expect(await vsctl('get', 'Bridge', node.intBridge, 'datapath_type')).toBe('netdev');
    expect(await vsctl('get', 'Bridge', node.intBridge, 'fail_mode')).toBe('secure');
    expect(await vsget('Open_vSwitch', '.', 'external_ids:system-id')).toBe(node.chassis);
    await waitFor(
      'the chassis in the southbound database',
      async () => (await chassisNames()).includes(node.chassis),
      {
        timeoutMs: 120_000,
        intervalMs: 500,
      },
    );
    expect(await sbctl('--bare', '--columns=hostname', 'find', 'Chassis', `name=${node.chassis}`)).toBe(
      node.chassis,
    );
    expect(await sbctl('--bare', '--columns=type', 'list', 'Encap')).toBe('geneve');
    expect(await sh(node.controller, ['ovn-appctl', '-t', 'ovn-controller', 'connection-status'])).toBe(
      'connected',
    );
    // The physnet's bridge, with its port, and its mapping for localnet ports.
    expect((await vsctl('list-ports', `snp${id}`)).split('\n')).toContain(pair!.phys);
    expect(await vsget('Open_vSwitch', '.', 'external_ids:ovn-bridge-mappings')).toBe(`physnet1:snp${id}`);
  }, 180_000);

  it('binds two ports of a logical switch to the chassis; the namespaces ping through OVN', async () => {
    const mac = (ns: string, dev: string): string =>
      /link\/ether (\S+)/.exec(ip('-n', ns, 'link', 'show', dev))![1]!;
    await nbctl('ls-add', `sw${id}`);
    for (const [lsp, ns, dev, addr] of [
      [`pa${id}`, pair!.nsA, `${pair!.hostA}n`, pair!.ipA],
      [`pb${id}`, pair!.nsB, `${pair!.hostB}n`, pair!.ipB],
    ] as const) {
      await nbctl('lsp-add', `sw${id}`, lsp, '--', 'lsp-set-addresses', lsp, `${mac(ns, dev)} ${addr}`);
    }
    for (const [host, lsp] of [
      [pair!.hostA, `pa${id}`],
      [pair!.hostB, `pb${id}`],
    ] as const)
      await vsctl(
        'add-port',
        node.intBridge,
        host,
        '--',
        'set',
        'Interface',
        host,
        `external_ids:iface-id=${lsp}`,
      );
    await waitFor(
      'both ports bound to the chassis',
      async () => {
        const bound = await sbctl('--bare', '--columns=logical_port', 'find', 'Port_Binding', `chassis!=[]`);
        return bound.includes(`pa${id}`) && bound.includes(`pb${id}`);
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    // Every chassis has put the switch's flows in place (ovn-controller reports the northbound's configuration number).
    await nbctl('--wait=hv', 'sync');
    const pinger = NsPinger.start(`/run/netns/${pair!.nsA}`, [pair!.ipB], { intervalS: 0.05 });
    try {
      await pinger.waitReplyAfter(Date.now() / 1000, 60_000);
    } finally {
      await pinger.stop();
    }
  }, 240_000);

  it('restarts and upgrades ovn_controller while the flows keep forwarding; the chassis keeps its name', async () => {
    const restart = await underPings(async () => {
      const c = await api.container(node.controller);
      await operation(
        `/v1/containers/${node.controller}/restart`,
        { expectedGeneration: c.generation },
        180_000,
      );
    });
    const upgrade = await underPings(async () => {
      const c = await api.container(node.controller);
      await operation(
        `/v1/containers/${node.controller}/upgrade`,
        { image: OVS_NEXT_IMAGE, expectedGeneration: c.generation },
        300_000,
      );
    });
    console.log(
      `network=ovn ovn_controller_restart_lost=${restart.lost} ovn_controller_restart_gap_ms=${restart.gapMs} ` +
        `ovn_controller_upgrade_lost=${upgrade.lost} ovn_controller_upgrade_gap_ms=${upgrade.gapMs} ` +
        `ping_sent=${restart.sent + upgrade.sent} ping_interval_ms=10`,
    );
    expect((await api.container(node.controller)).image).toBe(OVS_NEXT_IMAGE);
    expect(await chassisNames()).toEqual([node.chassis]);
    // The flows stayed in vswitchd while no ovn-controller ran: a gap of the whole stop and
    // start would be seconds. What remains is the new controller installing its flows (one
    // atomic bundle): at most a probe or two at 10 ms (docs/performance.md, OVN).
    expect(restart.gapMs).toBeLessThan(1000);
    expect(upgrade.gapMs).toBeLessThan(1000);
  }, 600_000);

  it('upgrades vswitchd with the flows saved and restored: the lost packets, window and restart time', async () => {
    const before = await api.container(node.vswitchd);
    const d = await underPings(() =>
      operation(
        `/v1/containers/${node.vswitchd}/upgrade`,
        { image: OVS_NEXT_IMAGE, expectedGeneration: before.generation },
        300_000,
      ),
    );
    const saved = await startOvsLine(node.vswitchd, 'saved');
    const stopped = await startOvsLine(node.vswitchd, 'stopped');
    const started = await startOvsLine(node.vswitchd, 'forwarding');
    const restartMs = stopped.ms! - saved.ms! + started.ms!;
    console.log(
      `network=ovn vswitchd_upgrade_lost=${d.lost} vswitchd_window_ms=${d.gapMs} vswitchd_restart_ms=${restartMs} ` +
        `ping_sent=${d.sent} ping_interval_ms=10 between_containers_ms=${started.started_at! - stopped.at!}`,
    );
    expect((await api.container(node.vswitchd)).image).toBe(OVS_NEXT_IMAGE);
    expect(await vsctl('get', 'Open_vSwitch', '.', 'other_config')).not.toContain('flow-restore-wait');
    expect(await sh(node.controller, ['ovn-appctl', '-t', 'ovn-controller', 'connection-status'])).toBe(
      'connected',
    );
  }, 600_000);
});
