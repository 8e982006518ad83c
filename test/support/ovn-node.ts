import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { join } from 'node:path';
import { REPO, type Sandbox } from './daemon.js';
import { OVS_IMAGE, ovsdbAndVswitchd, shippedSubset } from './ovs-node.js';

/**
 * The OVN containers of the shipped OVN compute set
 * (container-sets/ovn/compute.yaml, its `ovn` subset: openvswitch_db,
 * openvswitch_vswitchd, ovn_controller) beside OVN's central services
 * (container-sets-e2e/openstack/ovn.yaml: ovn_nb_db, ovn_sb_db, ovn_northd),
 * under one spcd, as a test runs them on this machine: the definitions as
 * shipped, each container renamed with the test's prefix, the databases on
 * the test's own loopback ports, and a per-host override file such as an
 * operator writes for a host without the openvswitch kernel module and
 * without --privileged (docs/how-to/openvswitch-host.md): the test's image,
 * explicit capabilities, the userspace datapath, the test's own run folders
 * and named volumes. No Neutron: the test writes the northbound database
 * itself, as ML2/OVN would.
 */
export interface OvnNode {
  readonly db: string;
  readonly vswitchd: string;
  readonly controller: string;
  readonly nbDb: string;
  readonly sbDb: string;
  readonly northd: string;
  /** The chassis's name (external_ids:system-id: the host's host_name). */
  readonly chassis: string;
  readonly intBridge: string;
  /** tcp:127.0.0.1:<port> of each database. */
  readonly nb: string;
  readonly sb: string;
  readonly volumes: readonly string[];
  readonly overridesFile: string;
}

const E2E_ROOT = '/var/tmp/spcd-e2e-openstack';
const E2E_PREFIX = 'spcd_e2e_os_';

/** The central set with the test's names, root, ports and run label. */
function ovnCentral(sb: Sandbox, prefix: string, nbPort: number, sbPort: number): string {
  const text = readFileSync(join(REPO, 'container-sets-e2e', 'openstack', 'ovn.yaml'), 'utf8');
  return text
    .replaceAll(E2E_ROOT, sb.root)
    .replaceAll(E2E_PREFIX, `${prefix}c_`)
    .replace(/^set: .*$/m, `set: ${prefix}ovn-central`)
    .replaceAll('16641', String(nbPort))
    .replaceAll('16642', String(sbPort))
    .replaceAll('spcd-e2e.run: manual', `spcd-e2e.run: ${prefix}`);
}

/**
 * Writes both sets and the overrides; `bridges` is
 * neutron.ovs.bridge_mappings (ovn-bridge-mappings), `ports`
 * openvswitch.bridge_ports, `intBridge` the integration bridge.
 */
export function writeOvnNode(
  sb: Sandbox,
  prefix: string,
  net: { bridges: Record<string, string>; ports: Record<string, string>; intBridge: string; nbPort: number },
): OvnNode {
  const { bridges, ports, intBridge, nbPort } = net;
  const sbPort = nbPort + 1;
  writeFileSync(join(sb.setsDir, 'compute.yaml'), shippedSubset(join('ovn', 'compute.yaml'), 'ovn', prefix));
  writeFileSync(join(sb.setsDir, 'ovn-central.yaml'), ovnCentral(sb, prefix, nbPort, sbPort));
  const runOvs = join(sb.root, 'run-openvswitch');
  const runOvn = join(sb.root, 'run-ovn-compute');
  for (const d of [runOvs, runOvn, join(sb.root, 'run-ovn')]) mkdirSync(d, { recursive: true });
  const logs = `${prefix}kolla_logs`;
  const dbVolume = `${prefix}openvswitch_db`;
  const common = [
    '/etc/localtime:/etc/localtime:ro',
    `${runOvs}:/run/openvswitch:shared`,
    `${logs}:/var/log/kolla`,
  ];
  const chassis = `${prefix.replace(/_/g, '-')}compute`;
  const overrides = {
    containers: {
      ...ovsdbAndVswitchd(prefix, [...common, '/lib/modules:/lib/modules:ro'], dbVolume),
      [`${prefix}ovn_controller`]: {
        image: OVS_IMAGE,
        binds: [...common, `${runOvn}:/run/ovn:shared`],
      },
    },
    values: {
      host_name: chassis,
      neutron: { ovs: { datapath_type: 'netdev', bridge_mappings: bridges, integration_bridge: intBridge } },
      openvswitch: { bridge_ports: ports },
      ovn: { sb_connection: `tcp:127.0.0.1:${sbPort}`, encap_ip: '127.0.0.1', ofctrl_wait_before_clear: 0 },
    },
  };
  const overridesFile = join(sb.root, 'overrides.yaml');
  writeFileSync(overridesFile, yaml.dump(overrides, { noRefs: true }));
  const c = `${prefix}c_`;
  return {
    db: `${prefix}openvswitch_db`,
    vswitchd: `${prefix}openvswitch_vswitchd`,
    controller: `${prefix}ovn_controller`,
    nbDb: `${c}ovn_nb_db`,
    sbDb: `${c}ovn_sb_db`,
    northd: `${c}ovn_northd`,
    chassis,
    intBridge,
    nb: `tcp:127.0.0.1:${nbPort}`,
    sb: `tcp:127.0.0.1:${sbPort}`,
    volumes: [logs, dbVolume, `${c}ovn_nb_db`, `${c}ovn_sb_db`],
    overridesFile,
  };
}
