import { describe, expect, it } from 'vitest';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { e2eNode } from '../support/e2e-compute.js';

/**
 * The OpenStack end-to-end node's Open vSwitch variant rendered as spcd
 * renders it: the shipped compute set (container-sets/compute.yaml) with this
 * machine's overrides for it (container-sets-e2e/hosts/openstack-compute-ovs.yaml)
 * and the test's network set, whose DHCP agent the same overrides put on Open
 * vSwitch (docs/explanation/openvswitch-proof.md).
 */
describe('the end-to-end node, Open vSwitch variant', () => {
  const files = async (container: string): Promise<Map<string, string>> =>
    renderedFileMap((await e2eNode('ovs')).render(container));

  it('the agent: the userspace datapath, the flat physnet on its bridge, no tunnels, no ipset', async () => {
    const ini = (await files('neutron_openvswitch_agent')).get('openvswitch_agent.ini') ?? '';
    expect(ini).toMatch(/^datapath_type = netdev$/m);
    expect(ini).toMatch(/^bridge_mappings = spcd-e2e:br-spcde2e$/m);
    expect(ini).toMatch(/^tunnel_types = $/m);
    expect(ini).toMatch(/^firewall_driver = iptables_hybrid$/m);
    expect(ini).toMatch(/^enable_ipset = false$/m);
    expect(ini).not.toMatch(/^local_ip/m);
    expect(ini).toMatch(/^ovsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m);
  });

  it('the DHCP agent on Open vSwitch: a veth into each namespace, OVSDB over its socket', async () => {
    const node = await e2eNode('ovs');
    const ini = renderedFileMap(node.render('spcd_e2e_os_neutron_dhcp_agent')).get('dhcp_agent.ini') ?? '';
    expect(ini).toMatch(/^interface_driver = openvswitch$/m);
    expect(ini).toMatch(/^ovs_use_veth = true$/m);
    expect(ini).toMatch(/^\[OVS\]\novsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m);
    const spec = node.spec('spcd_e2e_os_neutron_dhcp_agent');
    expect(spec.image).toBe('spcd-e2e/openvswitch:zed');
    expect(spec.binds.map((b) => b.target)).toEqual(
      expect.arrayContaining(['/run/netns', '/run/openvswitch']),
    );
  });

  it('vswitchd: the bridge and its port, the userspace datapath', async () => {
    const node = await e2eNode('ovs');
    const spec = node.spec('openvswitch_vswitchd');
    expect(spec.environment['KOLLA_SKIP_EXTEND_START']).toBe('true');
    const all = [...renderedFileMap(node.render('openvswitch_vswitchd')).values()].join('\n');
    expect(all).toContain('br-spcde2e');
    expect(all).toContain('spcdn-e2e');
    expect(all).toContain('netdev');
  });

  it("nova-compute's os-vif reaches OVSDB over its socket", async () => {
    const conf = (await files('nova_compute')).get('nova.conf') ?? '';
    expect(conf).toMatch(/^\[os_vif_ovs\]\n(?:#.*\n)*ovsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m);
  });

  it('the Linux bridge variant keeps its DHCP agent on Linux bridge interfaces', async () => {
    const ini = renderedFileMap((await e2eNode('lb')).render('spcd_e2e_os_neutron_dhcp_agent')).get(
      'dhcp_agent.ini',
    );
    expect(ini).toMatch(/^interface_driver = linuxbridge$/m);
    expect(ini).not.toMatch(/\[OVS\]/);
  });
});
