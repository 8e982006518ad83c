import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { Renderer, renderedFileMap } from '../../agent/render/renderer.js';
import { loadValueFile as loadYaml } from '../../agent/render/values.js';
import { sampleValues, shippedCompute } from '../support/sample-values.js';

/**
 * The shipped compute set (container-sets/compute.yaml: every container with
 * config files or permissions) rendered from the sample values in
 * test/fixtures/render/ and compared, byte for byte, with
 * test/fixtures/render/expected/<container>/<file>. After a deliberate
 * template or set change, regenerate with SPCD_UPDATE_EXPECTED=1 and review the diff.
 */

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const fixtures = join(repo, 'test', 'fixtures', 'render');
const templatesDir = join(repo, 'templates');
const update = process.env.SPCD_UPDATE_EXPECTED === '1';
const compute = await shippedCompute();
const COMPUTE_CONTAINERS = compute.containers;

let values: Record<string, unknown>;
let secretValues: Set<string>;

beforeAll(async () => {
  ({ values, secretValues } = await sampleValues());
});

describe('shipped compute templates', () => {
  it("cover every container of the set, and the sample defaults are the set's own", async () => {
    expect(COMPUTE_CONTAINERS.map((c) => c.name).sort()).toEqual([
      'neutron_openvswitch_agent',
      'nova_compute',
      'nova_libvirt',
      'openvswitch_db',
      'openvswitch_vswitchd',
    ]);
    expect(await loadYaml(join(fixtures, 'set-defaults.yaml'))).toEqual(compute.defaults);
  });

  for (const spec of COMPUTE_CONTAINERS) {
    it(`renders ${spec.name} as expected`, async () => {
      const renderer = new Renderer({ templatesDir, log: silentLogger() });
      const rendered = renderer.renderContainer(spec, values, secretValues);
      const files = renderedFileMap(rendered);
      expect([...files.keys()].sort()).toEqual([...spec.config.map((f) => f.dest), 'config.json'].sort());
      for (const [dest, content] of files) {
        const expectedPath = join(fixtures, 'expected', spec.name, dest);
        if (update) {
          await mkdir(dirname(expectedPath), { recursive: true });
          await writeFile(expectedPath, content);
        }
        expect(content, `${spec.name}/${dest}`).toBe(await readFile(expectedPath, 'utf8'));
      }
      expect(rendered.hash).toMatch(/^v1-[0-9a-f]{64}$/);
    });
  }

  it('gives the same hash on every run and a different one when a value changes', () => {
    const spec = COMPUTE_CONTAINERS.find((c) => c.name === 'nova_compute')!;
    const a = new Renderer({ templatesDir, log: silentLogger() }).renderContainer(spec, values, secretValues);
    const b = new Renderer({ templatesDir, log: silentLogger() }).renderContainer(spec, values, secretValues);
    expect(b.hash).toBe(a.hash);
    const changed = structuredClone(values);
    (changed.nova as { reserved_host_memory_mb: number }).reserved_host_memory_mb = 1024;
    const c = new Renderer({ templatesDir, log: silentLogger() }).renderContainer(
      spec,
      changed,
      secretValues,
    );
    expect(c.hash).not.toBe(a.hash);
  });

  it('writes kolla config.json with command, 4-digit perms and sources under /var/lib/kolla/config_files', () => {
    const spec = COMPUTE_CONTAINERS.find((c) => c.name === 'nova_libvirt')!;
    const rendered = new Renderer({ templatesDir, log: silentLogger() }).renderContainer(
      spec,
      values,
      secretValues,
    );
    expect(JSON.parse(rendered.configJson)).toEqual({
      command: '/usr/sbin/libvirtd',
      config_files: [
        {
          source: '/var/lib/kolla/config_files/libvirtd.conf',
          dest: '/etc/libvirt/libvirtd.conf',
          owner: 'root',
          perm: '0600',
        },
        {
          source: '/var/lib/kolla/config_files/qemu.conf',
          dest: '/etc/libvirt/qemu.conf',
          owner: 'root',
          perm: '0600',
        },
        {
          source: '/var/lib/kolla/config_files/sasl.conf',
          dest: '/etc/sasl2/libvirt.conf',
          owner: 'root',
          perm: '0600',
        },
        {
          source: '/var/lib/kolla/config_files/sasl-user',
          dest: '/usr/local/bin/sasl-user',
          owner: 'root',
          perm: '0700',
        },
        {
          source: '/var/lib/kolla/config_files/auth.conf',
          dest: '/root/.config/libvirt/auth.conf',
          owner: 'root',
          perm: '0600',
        },
      ],
      permissions: [],
    });
  });

  it('keeps the VM-survival settings in qemu.conf and libvirtd.conf', () => {
    const rendered = new Renderer({ templatesDir, log: silentLogger() }).renderContainer(
      COMPUTE_CONTAINERS.find((c) => c.name === 'nova_libvirt')!,
      values,
      secretValues,
    );
    const files = renderedFileMap(rendered);
    const qemu = files.get('qemu.conf') ?? '';
    for (const line of [
      'stdio_handler = "file"',
      'security_driver = "none"',
      'user = "nova"',
      'group = "nova"',
    ]) {
      expect(qemu.split('\n')).toContain(line);
    }
    const libvirtd = files.get('libvirtd.conf') ?? '';
    for (const line of ['auth_unix_rw = "none"', 'auth_unix_ro = "none"', 'log_outputs = "3:stderr"']) {
      expect(libvirtd.split('\n')).toContain(line);
    }
  });
});
