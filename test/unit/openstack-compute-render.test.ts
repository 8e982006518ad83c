import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TemplateConfig } from '../../agent/config/template-config.js';
import { silentLogger } from '../../agent/log.js';
import { allContainers } from '../../agent/model/spec.js';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from '../support/daemon.js';

/**
 * The compute and network sets of the OpenStack end-to-end test
 * (container-sets-e2e/openstack/compute.yaml, network.yaml) rendered as spcd
 * renders them: the values a real nova-compute, libvirtd and neutron-server
 * need on this host (docs/openstack-e2e.md), and the shipped compute set
 * (container-sets/compute.yaml) left without the test's extras.
 */
async function rendered(setsDir: string, container: string, secrets?: string): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-oscompute-'));
  let secretsFile: string | undefined;
  if (secrets) {
    secretsFile = join(dir, 'secrets.yaml');
    writeFileSync(secretsFile, secrets, { mode: 0o600 });
  }
  const config = new TemplateConfig({
    templatesDir: join(REPO, 'templates'),
    configRoot: join(dir, 'config'),
    files: { globalsFile: undefined, secretsFile },
    log: silentLogger(),
  });
  const desired = await loadDesired({
    setsDir: join(REPO, setsDir),
    checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
  });
  await config.load(desired);
  const spec = allContainers(desired.sets).find((c) => c.name === container);
  if (!spec) throw new Error(`no container ${container} in ${setsDir}`);
  return renderedFileMap(config.render(spec));
}

describe('openstack compute and network sets rendering', () => {
  it("nova-compute's nova.conf: TCG, no CPU model, stop at once, privsep without rootwrap, loopback AMQP", async () => {
    const conf =
      (await rendered('container-sets-e2e/openstack', 'spcd_e2e_os_nova_compute')).get('nova.conf') ?? '';
    expect(conf).toMatch(/^virt_type = qemu$/m);
    expect(conf).toMatch(/^cpu_mode = none$/m);
    expect(conf).toMatch(/^shutdown_timeout = 0$/m);
    expect(conf).toMatch(/^update_resources_interval = 15$/m);
    expect(conf).toMatch(
      /^\[nova_sys_admin\]\n(?:#.*\n)*helper_command = sudo privsep-helper --config-file \/etc\/nova\/nova\.conf$/m,
    );
    expect(conf).toMatch(/^transport_url = rabbit:\/\/guest:guest@127\.0\.0\.1:16572\/$/m);
    expect(conf).toMatch(/^instances_path = \/var\/lib\/nova\/instances$/m);
    expect(conf).toMatch(/^connection_uri = qemu:\/\/\/system$/m);
  });

  it("nova_libvirt's libvirtd.conf lets Kolla's nova gid use the socket", async () => {
    const conf =
      (await rendered('container-sets-e2e/openstack', 'spcd_e2e_os_nova_libvirt')).get('libvirtd.conf') ?? '';
    expect(conf).toMatch(/^unix_sock_group = "\+42436"$/m);
    expect(conf).toMatch(/^unix_sock_rw_perms = "0770"$/m);
    expect(conf).toMatch(/^listen_tcp = 0$/m);
  });

  it('neutron-server listens on loopback with the plugins its port queries need', async () => {
    const files = await rendered('container-sets-e2e/openstack', 'spcd_e2e_os_neutron_server');
    const conf = files.get('neutron.conf') ?? '';
    expect(conf).toMatch(/^bind_host = 127\.0\.0\.1$/m);
    expect(conf).toMatch(/^bind_port = 19696$/m);
    expect(conf).toMatch(/^service_plugins = router,port_forwarding$/m);
    expect(conf).toMatch(
      /^connection = mysql\+pymysql:\/\/neutron:e2e-neutron-db@127\.0\.0\.1:13306\/neutron$/m,
    );
    expect(files.get('ml2_conf.ini')).toMatch(/^mechanism_drivers = $/m);
  });

  it('the shipped compute set keeps Nova defaults for what only the test sets', async () => {
    const secrets = [
      'rabbitmq: { password: r }',
      'nova: { keystone_password: n, placement_password: p, metadata_secret: m }',
      'neutron: { keystone_password: q }',
    ].join('\n');
    const conf = (await rendered('container-sets', 'nova_compute', `${secrets}\n`)).get('nova.conf') ?? '';
    expect(conf).toMatch(/^virt_type = kvm$/m);
    expect(conf).not.toMatch(/shutdown_timeout|update_resources_interval|nova_sys_admin|helper_command/);
  });
});
