import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { Renderer, renderedFileMap } from '../../agent/render/renderer.js';
import { collectSecretValues, loadValueFile, mergeValues } from '../../agent/render/values.js';
import { allContainers, findSet, hasKollaConfig } from '../../agent/model/spec.js';
import { loadDesired } from '../../agent/spec/load.js';
import { loadValueFile as loadYaml } from '../../agent/render/values.js';

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
const compute = findSet(
  (
    await loadDesired({
      setsDir: join(repo, 'container-sets'),
      checkLibraryFile: join(repo, 'healthchecks', 'library.yaml'),
    })
  ).sets,
  'compute',
);
const COMPUTE_CONTAINERS = allContainers(compute ? [compute] : []).filter(hasKollaConfig);

let tmp: string;
let values: Record<string, unknown>;
let secretValues: Set<string>;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'spcd-render-tpl-'));
  // git does not keep 0600: copy the sample secrets to a file with the mode spcd demands.
  const secretsPath = join(tmp, 'secrets.yaml');
  await copyFile(join(fixtures, 'secrets.yaml'), secretsPath);
  await chmod(secretsPath, 0o600);
  const secrets = await loadValueFile(secretsPath, { secret: true });
  const merged = mergeValues({
    setDefaults: await loadValueFile(join(fixtures, 'set-defaults.yaml')),
    globals: await loadValueFile(join(fixtures, 'globals.yaml')),
    hostValues: await loadValueFile(join(fixtures, 'host.yaml')),
    secrets,
  });
  values = merged.values;
  secretValues = collectSecretValues(secrets);
});

afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
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
    expect(await loadYaml(join(fixtures, 'set-defaults.yaml'))).toEqual(compute?.defaults);
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
      'user = "root"',
      'group = "root"',
      'security_driver = "none"',
    ]) {
      expect(qemu.split('\n')).toContain(line);
    }
    const libvirtd = files.get('libvirtd.conf') ?? '';
    for (const line of ['auth_unix_rw = "none"', 'auth_unix_ro = "none"', 'log_outputs = "3:stderr"']) {
      expect(libvirtd.split('\n')).toContain(line);
    }
  });
});
