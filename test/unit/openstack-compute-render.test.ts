import { describe, expect, it } from 'vitest';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { HOST_GLOBALS, rendered, SHIPPED_SECRETS } from '../support/shipped-render.js';
import { e2eNode } from '../support/e2e-compute.js';

/**
 * The OpenStack end-to-end node rendered as spcd renders it: the shipped
 * Linux bridge compute set with this machine's overrides and the test's
 * secrets (container-sets-e2e/hosts/openstack-compute.yaml), and the test's
 * network set: the values a real nova-compute, libvirtd and neutron-server
 * need on this host (docs/explanation/openstack-proof.md); and the shipped compute sets
 * (container-sets/) left without the test's extras.
 */
/** A container of the end-to-end node (the shipped compute set with this machine's overrides), rendered. */
async function renderedOnNode(container: string): Promise<Map<string, string>> {
  return renderedFileMap((await e2eNode()).render(container));
}

describe('openstack compute and network sets rendering', () => {
  it("nova-compute's nova.conf: TCG, no CPU model, stop at once, privsep without rootwrap, loopback AMQP", async () => {
    const conf = (await renderedOnNode('nova_compute')).get('nova.conf') ?? '';
    expect(conf).toMatch(/^virt_type = qemu$/m);
    expect(conf).toMatch(/^cpu_mode = none$/m);
    expect(conf).toMatch(/^shutdown_timeout = 0$/m);
    expect(conf).toMatch(/^update_resources_interval = 15$/m);
    expect(conf).toMatch(
      /^\[nova_sys_admin\]\n(?:#.*\n)*helper_command = sudo privsep-helper --config-file \/etc\/nova\/nova\.conf$/m,
    );
    expect(conf).toMatch(/^transport_url = rabbit:\/\/guest:guest@127\.0\.0\.1:16572\/$/m);
    // Quorum queues, as kolla-ansible 2024.1 declares them (the control set's services too).
    expect(conf).toMatch(/^\[oslo_messaging_rabbit\]\nrabbit_quorum_queue = true$/m);
    expect(conf).toMatch(/^instances_path = \/var\/lib\/nova\/instances$/m);
    expect(conf).toMatch(/^connection_uri = qemu:\/\/\/system$/m);
    expect(conf).toMatch(
      /^\[vif_plug_linux_bridge_privileged\]\n(?:#.*\n)*helper_command = sudo privsep-helper --config-file \/etc\/nova\/nova\.conf$/m,
    );
  });

  it("nova_libvirt's libvirtd.conf lets Kolla's nova gid use the socket", async () => {
    const conf = (await renderedOnNode('nova_libvirt')).get('libvirtd.conf') ?? '';
    expect(conf).toMatch(/^unix_sock_group = "\+42436"$/m);
    expect(conf).toMatch(/^unix_sock_rw_perms = "0770"$/m);
    expect(conf).toMatch(/^listen_tcp = 0$/m);
  });

  it('neutron-server listens on loopback with the plugins its port queries need', async () => {
    const files = await renderedOnNode('spcd_e2e_os_neutron_server');
    const conf = files.get('neutron.conf') ?? '';
    expect(conf).toMatch(/^bind_host = 127\.0\.0\.1$/m);
    expect(conf).toMatch(/^bind_port = 19696$/m);
    expect(conf).toMatch(/^service_plugins = router,port_forwarding$/m);
    expect(conf).toMatch(
      /^connection = mysql\+pymysql:\/\/neutron:e2e-neutron-db@127\.0\.0\.1:13306\/neutron$/m,
    );
    const ml2 = files.get('ml2_conf.ini') ?? '';
    // Open vSwitch first: a port binds to the driver whose agent is alive on its host.
    expect(ml2).toMatch(/^mechanism_drivers = openvswitch,linuxbridge$/m);
    expect(ml2).toMatch(/^type_drivers = flat,local$/m);
    expect(ml2).toMatch(/^\[ml2_type_flat\]\nflat_networks = spcd-e2e$/m);
    expect(ml2).toMatch(/^\[securitygroup\]\nenable_security_group = true$/m);
    // Neutron 21 refuses the linuxbridge mechanism driver without the flag.
    expect(conf).toMatch(/^\[experimental\]\n(?:#.*\n)*linuxbridge = true$/m);
    expect(conf).toMatch(/^notify_nova_on_port_status_changes = true$/m);
    expect(conf).toMatch(/^\[nova\]\n(?:.*\n)*?username = nova\npassword = e2e-nova$/m);
    // It starts once MariaDB greets and RabbitMQ answers AMQP (after an engine restart all start at once).
    const wait = files.get('spcd-wait-then-exec.sh') ?? '';
    expect(wait).toMatch(/^until \[ -n "\$\(first_byte 127\.0\.0\.1 13306 ''\)" \]; do$/m);
    expect(wait).toMatch(/^wait_for 127\.0\.0\.1 16572 'AMQP\\0\\0\\x09\\x01' 01$/m);
  });

  it('the DHCP agent: the compute host, Linux bridge interfaces, no DNS forwarding', async () => {
    const files = await renderedOnNode('spcd_e2e_os_neutron_dhcp_agent');
    expect(files.get('neutron.conf')).toMatch(/^host = spcd-e2e-compute$/m);
    expect(files.get('neutron.conf')).toMatch(
      /^transport_url = rabbit:\/\/guest:guest@127\.0\.0\.1:16572\/$/m,
    );
    const ini = files.get('dhcp_agent.ini') ?? '';
    expect(ini).toMatch(/^interface_driver = linuxbridge$/m);
    expect(ini).toMatch(/^dnsmasq_local_resolv = false$/m);
    expect(ini).toMatch(/^enable_isolated_metadata = false$/m);
  });

  it('the Linux bridge agent maps the physnet to the test interface, iptables security groups, no VXLAN', async () => {
    const files = await renderedOnNode('neutron_linuxbridge_agent');
    expect(files.get('neutron.conf')).toMatch(/^host = spcd-e2e-compute$/m);
    const ini = files.get('linuxbridge_agent.ini') ?? '';
    expect(ini).toMatch(/^physical_interface_mappings = spcd-e2e:spcdn-e2e$/m);
    expect(ini).not.toMatch(/bridge_mappings/);
    expect(ini).toMatch(/^enable_vxlan = false$/m);
    expect(ini).not.toMatch(/local_ip/);
    expect(ini).toMatch(/^firewall_driver = iptables$/m);
    expect(ini).toMatch(/^enable_ipset = false$/m);
  });

  it("the shipped Linux bridge compute set: nova as the OVS set's, the agent with iptables and VXLAN", async () => {
    const secrets = SHIPPED_SECRETS;
    const lb = await rendered(
      'container-sets/linuxbridge',
      'neutron_linuxbridge_agent',
      `${secrets}\n`,
      HOST_GLOBALS,
    );
    const ini = lb.get('linuxbridge_agent.ini') ?? '';
    expect(ini).toMatch(/^firewall_driver = iptables$/m);
    expect(ini).toMatch(/^enable_ipset = true$/m);
    expect(ini).toMatch(/^enable_vxlan = true\nlocal_ip = 198\.51\.100\.10\nl2_population = true$/m);
    expect(ini).not.toMatch(/mappings/);
    const neutronConf = lb.get('neutron.conf') ?? '';
    expect(neutronConf).toMatch(/^transport_url = rabbit:\/\/openstack:r@192\.0\.2\.3:5672\/$/m);
    expect(neutronConf).toMatch(/^\[oslo_messaging_rabbit\]\nrabbit_quorum_queue = true$/m);
    expect(neutronConf).not.toMatch(/^host\s*=/m);
    for (const c of ['nova_compute', 'nova_libvirt']) {
      const ovs = await rendered('container-sets', c, `${secrets}\n`, HOST_GLOBALS);
      // The same but for os-vif's OVSDB, which only the Open vSwitch set's nova.conf names.
      const conf = ovs.get('nova.conf');
      if (conf !== undefined) ovs.set('nova.conf', conf.replace(/^\[os_vif_ovs\]\n(?:.*\n)*?\n/m, ''));
      expect(await rendered('container-sets/linuxbridge', c, `${secrets}\n`, HOST_GLOBALS)).toEqual(ovs);
    }
  });

  it("the shipped OVS set: OVSDB on its unix socket only, open to Kolla's users, a TCP remote only on an address the host names", async () => {
    const secrets = SHIPPED_SECRETS;
    const db = await rendered('container-sets', 'openvswitch_db', `${secrets}\n`, HOST_GLOBALS);
    expect(db.get('start-ovsdb-server')).toMatch(/--remote=punix:\/run\/openvswitch\/db\.sock/);
    expect(db.get('start-ovsdb-server')).not.toMatch(/ptcp|tcp:/);
    expect(JSON.parse(db.get('config.json') ?? '{}').command).toBe('start-ovsdb-server');
    const agent = await rendered('container-sets', 'neutron_openvswitch_agent', `${secrets}\n`, HOST_GLOBALS);
    expect(agent.get('openvswitch_agent.ini')).toMatch(
      /^ovsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m,
    );
    // Kolla's users open the socket: root:kolla 0770 (the agent as neutron, os-vif in nova-compute as nova).
    expect(db.get('start-ovsdb-server')).toMatch(
      /^umask 0007\nexec setpriv --regid 42400 --clear-groups -- \/usr\/sbin\/ovsdb-server /m,
    );
    const nova = await rendered('container-sets', 'nova_compute', `${secrets}\n`, HOST_GLOBALS);
    expect(nova.get('nova.conf')).toMatch(
      /^\[os_vif_ovs\]\n(?:#.*\n)*ovsdb_connection = unix:\/run\/openvswitch\/db\.sock$/m,
    );
    const tcp = await rendered(
      'container-sets',
      'openvswitch_db',
      `${secrets}\n`,
      `${HOST_GLOBALS}\nopenvswitch: { ovsdb_tcp_address: 192.0.2.10 }`,
    );
    expect(tcp.get('start-ovsdb-server')).toMatch(/^ {4}--remote="ptcp:6640:192\.0\.2\.10" \\$/m);
  });

  it("libvirt over TCP only with SASL: its user, database and both clients' credentials; no password, no render", async () => {
    const globals = `${HOST_GLOBALS}\nlibvirt: { listen_tcp: true, listen_addr: 192.0.2.10 }`;
    const secrets = `${SHIPPED_SECRETS}\nlibvirt: { sasl_password: "s3cr'et$x" }\n`;
    const lv = await rendered('container-sets', 'nova_libvirt', secrets, globals);
    expect(lv.get('libvirtd.conf')).toMatch(/^listen_tcp = 1\nlisten_tls = 0\nauth_tcp = "sasl"$/m);
    expect(lv.get('sasl.conf')).toMatch(
      /^mech_list: digest-md5\nsasldb_path: \/var\/lib\/libvirt\/passwd\.db$/m,
    );
    // The password reaches saslpasswd2 through a quoted heredoc, as it is.
    expect(lv.get('sasl-user')).toContain("<<'SPCD_SASL_PASSWORD'\ns3cr'et$x\nSPCD_SASL_PASSWORD\n");
    const credentials =
      /^\[credentials-spcd\]\nauthname=nova\npassword=s3cr'et\$x\n\n\[auth-libvirt-default\]\ncredentials=spcd$/m;
    expect(lv.get('auth.conf')).toMatch(credentials);
    const paths = (m: Map<string, string>): string[] =>
      (JSON.parse(m.get('config.json') ?? '{}') as { config_files: { dest: string }[] }).config_files.map(
        (f) => f.dest,
      );
    expect(paths(lv)).toEqual(
      expect.arrayContaining(['/etc/sasl2/libvirt.conf', '/root/.config/libvirt/auth.conf']),
    );
    const nova = await rendered('container-sets/linuxbridge', 'nova_compute', secrets, globals);
    expect(nova.get('auth.conf')).toMatch(credentials);
    expect(paths(nova)).toContain('/var/lib/nova/.config/libvirt/auth.conf');
    // TCP on without the password: refused, naming the value (secrets longer
    // than a letter, so that the error's masking leaves the name readable).
    const noSasl = SHIPPED_SECRETS.replace(/: ([a-z]),/g, ': $1-secret,').replace(
      /: ([a-z]) }/g,
      ': $1-secret }',
    );
    await expect(rendered('container-sets', 'nova_libvirt', `${noSasl}\n`, globals)).rejects.toThrow(
      /sasl-user\.j2, line \d+: required: libvirt\.sasl_password is required/,
    );
    // TCP off: no credentials, and the task has nothing to do.
    const off = await rendered('container-sets', 'nova_libvirt', `${SHIPPED_SECRETS}\n`, HOST_GLOBALS);
    expect(off.get('auth.conf')).not.toMatch(/password/);
    expect(off.get('sasl-user')).not.toMatch(/saslpasswd2/);
  });

  it('the shipped compute set keeps Nova defaults for what only the test sets', async () => {
    const secrets = SHIPPED_SECRETS;
    const conf =
      (await rendered('container-sets', 'nova_compute', `${secrets}\n`, HOST_GLOBALS)).get('nova.conf') ?? '';
    expect(conf).toMatch(/^virt_type = kvm$/m);
    expect(conf).not.toMatch(/shutdown_timeout|update_resources_interval|nova_sys_admin|helper_command/);
  });
});
