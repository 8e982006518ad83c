import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { TemplateConfig } from '../../agent/config/template-config.js';
import { silentLogger } from '../../agent/log.js';
import { allContainers, hasKollaConfig, type ContainerSpec } from '../../agent/model/spec.js';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from '../support/daemon.js';

/**
 * The OpenStack end-to-end control set (container-sets-e2e/openstack/
 * control.yaml) rendered as spcd renders it (set and subset defaults, no
 * globals or secrets): every container's files render, and the values the
 * services depend on land where docs/reference/openstack-test-images.md says. The integration
 * test (test/integration/openstack-control.test.ts) runs the same set.
 */
const config = new TemplateConfig({
  templatesDir: join(REPO, 'templates'),
  configRoot: mkdtempSync(join(tmpdir(), 'spcd-osrender-')),
  files: { globalsFile: undefined, secretsFile: undefined },
  log: silentLogger(),
});
let containers: ContainerSpec[] = [];

beforeAll(async () => {
  const desired = await loadDesired({
    setsDir: join(REPO, 'container-sets-e2e', 'openstack'),
    checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
  });
  await config.load(desired);
  containers = allContainers(desired.sets).filter(hasKollaConfig);
});

function files(name: string): Map<string, string> {
  const spec = containers.find((c) => c.name === name);
  if (!spec) throw new Error(`no container ${name} in the set`);
  return renderedFileMap(config.render(spec));
}

interface Register {
  auth_url: string;
  users: { name: string; password: string }[];
  services: { name: string; type: string; url: string }[];
}
function register(name: string): Register {
  return JSON.parse(files(name).get('spcd-register.json') ?? 'null') as Register;
}

describe('openstack control set rendering', () => {
  it('renders every container with config', () => {
    expect(containers.length).toBeGreaterThan(0);
    for (const c of containers) expect(files(c.name).get('config.json'), c.name).toBeDefined();
  });

  it('registers placement in keystone on loopback', () => {
    const r = register('spcd_e2e_os_placement');
    expect(r.auth_url).toBe('http://127.0.0.1:15000/v3');
    expect(r.users).toEqual([{ name: 'placement', password: 'e2e-placement' }]);
    expect(r.services).toEqual([
      { name: 'placement', type: 'placement', description: 'Placement API', url: 'http://127.0.0.1:18778' },
    ]);
    expect(files('spcd_e2e_os_placement').get('placement.conf')).toContain('password = e2e-placement\n');
  });

  it('registers glance and nova (with the neutron user) and makes the flavor from the scheduler', () => {
    expect(register('spcd_e2e_os_glance_api').services).toEqual([
      { name: 'glance', type: 'image', description: 'Image service', url: 'http://127.0.0.1:19292' },
    ]);
    const nova = register('spcd_e2e_os_nova_api');
    expect(nova.users.map((u) => u.name)).toEqual(['nova', 'neutron']);
    expect(nova.services.map((x) => `${x.type} ${x.url}`)).toEqual(['compute http://127.0.0.1:18774/v2.1']);
    expect(register('spcd_e2e_os_nova_scheduler')).toMatchObject({
      flavors: [{ name: 'm1.spcd', ram: 128, vcpus: 1, disk: 0 }],
    });
  });

  it('gives every nova control service one nova.conf with databases, token check and one worker', () => {
    const conf = files('spcd_e2e_os_nova_api').get('nova.conf') ?? '';
    for (const line of [
      'transport_url = rabbit://guest:guest@127.0.0.1:16572/',
      '[api_database]',
      'connection = mysql+pymysql://nova:e2e-nova-db@127.0.0.1:13306/nova_api',
      'connection = mysql+pymysql://nova:e2e-nova-db@127.0.0.1:13306/nova',
      'discover_hosts_in_cells_interval = 10',
      'workers = 1',
      '[keystone_authtoken]',
      'api_servers = http://127.0.0.1:19292',
    ]) {
      expect(conf.split('\n'), line).toContain(line);
    }
    expect(files('spcd_e2e_os_nova_conductor').get('nova.conf')).toBe(conf);
    expect(files('spcd_e2e_os_nova_scheduler').get('nova.conf')).toBe(conf);
    // Every port the set renders is on 127.0.0.1.
    for (const c of containers) {
      for (const [dest, text] of files(c.name)) {
        for (const m of text.matchAll(/(?:\/\/|@)([0-9a-z.-]+):\d+/g))
          expect(m[1], `${c.name}/${dest}`).toBe('127.0.0.1');
      }
    }
  });
});
