import { describe, expect, it } from 'vitest';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { e2eNode } from '../support/e2e-compute.js';

/**
 * The OpenStack end-to-end node's OVN variant rendered as spcd renders it:
 * the shipped OVN compute set (container-sets/ovn/compute.yaml) with this
 * machine's overrides for it (container-sets-e2e/hosts/openstack-compute-ovn.yaml),
 * OVN's central set and the test's network set on ML2/OVN
 * (test/e2e/openstack-ovn.ts; docs/explanation/ovn-proof.md).
 */
describe('the end-to-end node, OVN variant', () => {
  it('neutron-server on ML2/OVN: the OVN driver alone, the central databases, OVN L3, no metadata', async () => {
    const files = renderedFileMap((await e2eNode('ovn')).render('spcd_e2e_os_neutron_server'));
    const ml2 = files.get('ml2_conf.ini') ?? '';
    expect(ml2).toMatch(/^mechanism_drivers = ovn$/m);
    expect(ml2).toMatch(/^type_drivers = flat,geneve,local$/m);
    expect(ml2).toMatch(/^tenant_network_types = geneve$/m);
    expect(ml2).toMatch(/^\[ml2_type_geneve\]\nvni_ranges = 1001:2000\n(?:#.*\n)*max_header_size = 38$/m);
    expect(ml2).toMatch(
      /^\[ovn\]\novn_nb_connection = tcp:127\.0\.0\.1:16641\novn_sb_connection = tcp:127\.0\.0\.1:16642$/m,
    );
    expect(ml2).toMatch(/^ovn_metadata_enabled = false$/m);
    const conf = files.get('neutron.conf') ?? '';
    expect(conf).toMatch(/^service_plugins = ovn-router,port_forwarding$/m);
    expect(conf).not.toMatch(/\[experimental\]/);
  });

  it('has no DHCP agent: OVN answers DHCP', async () => {
    const node = await e2eNode('ovn');
    expect(() => node.spec('spcd_e2e_os_neutron_dhcp_agent')).toThrow(
      /no container spcd_e2e_os_neutron_dhcp_agent/,
    );
    expect(node.spec('spcd_e2e_os_ovn_sb_db').image).toBe('spcd-e2e/openvswitch:zed');
  });

  it("ovn_controller's chassis: the userspace datapath, the physnet's bridge, the southbound database", async () => {
    const node = await e2eNode('ovn');
    const script = renderedFileMap(node.render('ovn_controller')).get('ovn-chassis') ?? '';
    expect(script).toMatch(/^name=spcd-e2e-compute$/m);
    expect(script).toContain('datapath_type=netdev');
    expect(script).toContain('external_ids:ovn-bridge-datapath-type=netdev');
    expect(script).toContain('external_ids:ovn-remote="tcp:127.0.0.1:16642"');
    expect(script).toContain('external_ids:ovn-bridge-mappings="spcd-e2e:br-spcde2e"');
    expect(node.spec('ovn_controller').image).toBe('spcd-e2e/openvswitch:zed');
  });

  it("nova-compute: os-vif's default datapath is the host's, OVSDB over its socket", async () => {
    const node = await e2eNode('ovn');
    expect(node.spec('nova_compute').environment['SPCD_E2E_OVS_DEFAULT_DATAPATH']).toBe('netdev');
    const conf = renderedFileMap(node.render('nova_compute')).get('nova.conf') ?? '';
    expect(conf).toMatch(/^\[os_vif_ovs\]\n(?:#.*\n)*ovsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m);
  });

  it('the other variants keep neutron-server on the agents and the DHCP agent', async () => {
    const node = await e2eNode('ovs');
    const ml2 = renderedFileMap(node.render('spcd_e2e_os_neutron_server')).get('ml2_conf.ini') ?? '';
    expect(ml2).toMatch(/^mechanism_drivers = openvswitch,linuxbridge$/m);
    expect(ml2).not.toMatch(/\[ovn\]/);
    expect(node.spec('spcd_e2e_os_neutron_dhcp_agent').name).toBe('spcd_e2e_os_neutron_dhcp_agent');
  });
});
