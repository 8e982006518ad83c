import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';
import { HOST_GLOBALS, rendered, SHIPPED_SECRETS } from '../support/shipped-render.js';

/**
 * The shipped OVN compute set (container-sets/ovn/compute.yaml) rendered as
 * spcd renders it for a host: the chassis's bootstrap script, and the
 * containers it shares with the Open vSwitch set, which must stay the same.
 */
const OVN_GLOBALS = `${HOST_GLOBALS}\novn: { sb_connection: 'tcp:192.0.2.2:6642', encap_ip: 198.51.100.10 }`;
const secrets = `${SHIPPED_SECRETS}\n`;

type SetFile = {
  containers: Record<string, unknown>;
  sets: Record<string, { containers: Record<string, unknown> }>;
};
const load = (file: string): SetFile =>
  yaml.load(readFileSync(join(REPO, 'container-sets', file), 'utf8')) as SetFile;

describe('the shipped OVN compute set', () => {
  it("ovn_controller's bootstrap: br-int secure, the host's datapath type, the chassis's settings", async () => {
    const globals = OVN_GLOBALS.replace(
      /^neutron: .*$/m,
      'host_name: cmp-7\nneutron: { ovs: { datapath_type: netdev, bridge_mappings: { physnet1: br-ex, physnet2: br-vlan } } }',
    );
    const script =
      (await rendered('container-sets/ovn', 'ovn_controller', secrets, globals)).get('ovn-chassis') ?? '';
    expect(script).toMatch(/^name=cmp-7$/m);
    expect(script).toContain('add-br "$br" -- set Bridge "$br" fail_mode=secure datapath_type=netdev');
    expect(script).toMatch(/^br=br-int$/m);
    // system-id only when the host has none: a chassis keeps its name.
    expect(script).toMatch(/if ! vsctl --if-exists get Open_vSwitch \. external_ids:system-id/);
    for (const line of [
      'external_ids:ovn-remote="tcp:192.0.2.2:6642"',
      'external_ids:ovn-encap-type=geneve',
      'external_ids:ovn-encap-ip=198.51.100.10',
      'external_ids:ovn-bridge-datapath-type=netdev',
      'external_ids:ovn-monitor-all=false',
      'external_ids:ovn-ofctrl-wait-before-clear=8000',
    ])
      expect(script).toContain(line);
    expect(script).toContain('external_ids:ovn-bridge-mappings="physnet1:br-ex,physnet2:br-vlan"');
  });

  it('without bridge mappings or host_name: the mapping removed, the machine hostname', async () => {
    const script = (await rendered('container-sets/ovn', 'ovn_controller', secrets, OVN_GLOBALS)).get(
      'ovn-chassis',
    );
    expect(script).toMatch(/^name=$/m);
    expect(script).toContain('[[ -n "$name" ]] || name=$(hostname)');
    expect(script).toContain('vsctl remove Open_vSwitch . external_ids ovn-bridge-mappings');
    expect(script).toMatch(/datapath_type=system/);
  });

  it('refuses to render without the southbound database or the tunnel address', async () => {
    // Secrets long enough that masking them leaves the message readable.
    const long = secrets.replace(/: (\w)( ?[,}])/g, ': secret-$1$2');
    await expect(rendered('container-sets/ovn', 'ovn_controller', long, HOST_GLOBALS)).rejects.toThrow(
      /ovn_controller.*ovn\.(sb_connection|encap_ip)|ovn\.(sb_connection|encap_ip).*ovn_controller/s,
    );
  });

  it("shares nova's and Open vSwitch's containers with the Open vSwitch set, definition and files", async () => {
    const ovs = load('compute.yaml');
    const ovn = load('ovn/compute.yaml');
    expect(ovn.containers).toEqual(ovs.containers);
    for (const c of ['openvswitch_db', 'openvswitch_vswitchd'])
      expect(ovn.sets.ovn!.containers[c]).toEqual(ovs.sets.neutron!.containers[c]);
    expect(Object.keys(ovn.sets)).toEqual(['ovn']);
    expect(Object.keys(ovn.sets.ovn!.containers).sort()).toEqual([
      'openvswitch_db',
      'openvswitch_vswitchd',
      'ovn_controller',
    ]);
    for (const c of ['nova_libvirt', 'nova_compute', 'openvswitch_vswitchd', 'openvswitch_db'])
      expect(await rendered('container-sets/ovn', c, secrets, OVN_GLOBALS)).toEqual(
        await rendered('container-sets', c, secrets, HOST_GLOBALS),
      );
  });
});
