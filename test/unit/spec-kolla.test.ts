/**
 * Kolla's config.json vocabulary in a set file: permissions, per-file flags,
 * established checks and bootstrap tasks that start through kolla_start. Each
 * bad input names its file:line and field; the good ones render into
 * config.json in Kolla's format.
 */
import { describe, expect, it } from 'vitest';
import { specHash } from '../../agent/model/hash.js';
import { buildKollaConfigJson } from '../../agent/render/kolla.js';
import { cleanupAfterEach, containerYaml, loadOne, problemsOf } from '../fixtures/spec/helpers.js';
import { shippedCompute } from '../support/sample-values.js';

cleanupAfterEach();

/** A one-container set file; `fields` start at line 6, after image and command. */
const container = (...fields: string[]): string => containerYaml(fields, ['command: [nova-compute]']);

async function problems(text: string): Promise<string[]> {
  return (await problemsOf(text, {})).map((p) => `${p.where}: ${p.message}`);
}

describe('permissions and per-file flags', () => {
  it("load, and render into config.json in Kolla's format", async () => {
    const c = await loadOne(
      container(
        'config:',
        '  - {template: n.j2, dest: nova.conf, container_path: /etc/nova/nova.conf, owner: nova, mode: "0600"}',
        '  - {template: r.j2, dest: release, container_path: /etc/nova/release, owner: "root:nova", mode: "640", optional: true}',
        '  - {template: s.j2, dest: secrets, container_path: /etc/libvirt/secrets, merge: true, preserve_properties: true}',
        'permissions:',
        '  - {path: /var/log/kolla/nova, owner: "nova:nova", recurse: true}',
        '  - {path: /var/lib/nova, owner: nova, perm: "0750"}',
      ),
    );
    expect(c.permissions).toEqual([
      { path: '/var/log/kolla/nova', owner: 'nova:nova', recurse: true },
      { path: '/var/lib/nova', owner: 'nova', perm: '0750', recurse: false },
    ]);
    expect(c.config.map((f) => [f.optional, f.merge, f.preserveProperties])).toEqual([
      [undefined, undefined, undefined],
      [true, undefined, undefined],
      [undefined, true, true],
    ]);
    const json = JSON.parse(
      buildKollaConfigJson(
        c,
        c.config.map((f) => ({ ...f })),
      ),
    ) as unknown;
    expect(json).toEqual({
      command: 'nova-compute',
      config_files: [
        {
          source: '/var/lib/kolla/config_files/nova.conf',
          dest: '/etc/nova/nova.conf',
          owner: 'nova',
          perm: '0600',
        },
        {
          source: '/var/lib/kolla/config_files/release',
          dest: '/etc/nova/release',
          owner: 'root:nova',
          perm: '0640',
          optional: true,
        },
        {
          source: '/var/lib/kolla/config_files/secrets',
          dest: '/etc/libvirt/secrets',
          merge: true,
          preserve_properties: true,
        },
      ],
      permissions: [
        { path: '/var/log/kolla/nova', owner: 'nova:nova', recurse: true },
        { path: '/var/lib/nova', owner: 'nova', perm: '0750' },
      ],
    });
  });

  it('leave the spec and its hash as before when absent', async () => {
    const c = await loadOne(
      container('config: [{template: n.j2, dest: nova.conf, container_path: /etc/nova/nova.conf}]'),
    );
    expect('permissions' in c).toBe(false);
    expect(Object.keys(c.config[0]!).sort()).toEqual([
      'containerPath',
      'dest',
      'format',
      'mode',
      'owner',
      'template',
    ]);
    const withPerms = await loadOne(
      container(
        'config: [{template: n.j2, dest: nova.conf, container_path: /etc/nova/nova.conf}]',
        'permissions: [{path: /var/lib/nova, owner: nova}]',
      ),
    );
    // permissions reach the container through config.json (the config hash), not the engine.
    expect(specHash(withPerms)).toBe(specHash(c));
  });

  it('permissions alone make a config.json (with an empty config_files)', async () => {
    const c = await loadOne(container('permissions: [{path: /var/lib/nova, owner: nova, recurse: true}]'));
    expect(JSON.parse(buildKollaConfigJson(c, []))).toEqual({
      command: 'nova-compute',
      config_files: [],
      permissions: [{ path: '/var/lib/nova', owner: 'nova', recurse: true }],
    });
  });

  const cases: [string, string[], string][] = [
    [
      'a relative permissions path',
      ['permissions: [{path: var/lib/nova, owner: nova}]'],
      's.yaml:6: containers.web.permissions[0].path: "var/lib/nova" is not an absolute path inside the container (globs * ? [] allowed)',
    ],
    [
      'a permissions path with ..',
      ['permissions: [{path: /var/lib/../etc, owner: nova}]'],
      's.yaml:6: containers.web.permissions[0].path: "/var/lib/../etc" must not contain "..", "." or empty segments, nor end in "/"',
    ],
    [
      'a bad owner',
      ['permissions: [{path: /var/lib/nova, owner: "nova:"}]'],
      's.yaml:6: containers.web.permissions[0].owner: "nova:" is not a user or user:group name (e.g. nova or root:nova)',
    ],
    [
      'a three-digit perm',
      ['permissions: [{path: /var/lib/nova, owner: nova, perm: "750"}]'],
      's.yaml:6: containers.web.permissions[0].perm: "750" is not four octal digits starting with 0, like "0750"',
    ],
    [
      // Kolla's set_configs reads "2750" as "2o750", which Python's int() refuses.
      'a setgid perm',
      ['permissions: [{path: /var/lib/nova, owner: nova, perm: "2750"}]'],
      's.yaml:6: containers.web.permissions[0].perm: "2750" is not four octal digits starting with 0, like "0750"',
    ],
    [
      'a sticky config mode',
      ['config: [{template: s.j2, dest: s, container_path: /s, mode: "1777"}]'],
      's.yaml:6: containers.web.config[0].mode: "1777" is not an octal file mode like "0600" (no setuid, setgid or sticky bit)',
    ],
    [
      'an unquoted perm',
      ['permissions: [{path: /var/lib/nova, owner: nova, perm: 750}]'],
      's.yaml:6: containers.web.permissions[0].perm: must be a quoted octal string like "0600", not number',
    ],
    [
      'a missing owner',
      ['permissions:', '  - {path: /var/lib/nova}'],
      's.yaml:7: containers.web.permissions[0]: owner is required',
    ],
    [
      'a path given twice',
      ['permissions:', '  - {path: /var/lib/nova, owner: nova}', '  - {path: /var/lib/nova, owner: root}'],
      's.yaml:8: containers.web.permissions[1].path: path /var/lib/nova is already used by containers.web.permissions[0]',
    ],
    [
      'recurse that is not a boolean',
      ['permissions: [{path: /var/lib/nova, owner: nova, recurse: yes please}]'],
      's.yaml:6: containers.web.permissions[0].recurse: must be true or false, not a string',
    ],
    [
      'owner beside preserve_properties',
      ['config: [{template: s.j2, dest: s, container_path: /s, owner: nova, preserve_properties: true}]'],
      "s.yaml:6: containers.web.config[0].owner: owner has no effect with preserve_properties: true (Kolla keeps the source's)",
    ],
    [
      'a flag that is not a boolean',
      ['config: [{template: s.j2, dest: s, container_path: /s, optional: 1}]'],
      's.yaml:6: containers.web.config[0].optional: must be true or false, not a number',
    ],
  ];
  it.each(cases)('rejects %s', async (_name, fields, message) => {
    expect(await problems(container(...fields))).toEqual([message]);
  });

  it('rejects permissions without a command (config.json needs one)', async () => {
    const text = [
      'set: s',
      'containers:',
      '  web:',
      '    image: busybox:1.36',
      '    permissions: [{path: /x, owner: nova}]',
      '',
    ];
    expect(await problems(text.join('\n'))).toEqual([
      "s.yaml:5: containers.web.permissions: needs command: the image's kolla_start runs config.json's command, which spcd writes from it",
    ]);
  });
});

describe('established checks', () => {
  it("load Kolla's healthcheck_port meaning, ports de-duplicated and sorted", async () => {
    const c = await loadOne(
      container(
        'healthchecks: [{name: amqp, established: {process: nova-compute, ports: [5672, 5671, 5672]}}]',
      ),
    );
    expect(c.healthchecks[0]?.probe).toEqual({
      kind: 'established',
      process: 'nova-compute',
      ports: [5671, 5672],
    });
  });

  const cases: [string, string, string][] = [
    [
      'no ports',
      '{process: nova-compute}',
      's.yaml:6: containers.web.healthchecks[0].established: ports is required (a list of TCP ports, e.g. [5672])',
    ],
    [
      'an empty port list',
      '{process: nova-compute, ports: []}',
      's.yaml:6: containers.web.healthchecks[0].established.ports: must name at least one port',
    ],
    [
      'port 0',
      '{process: nova-compute, ports: [0]}',
      's.yaml:6: containers.web.healthchecks[0].established.ports[0]: must be between 1 and 65535, not 0',
    ],
    [
      'a process with a slash',
      '{process: /usr/bin/nova-compute, ports: [5672]}',
      's.yaml:6: containers.web.healthchecks[0].established.process: "/usr/bin/nova-compute" is not a process name (its comm, or the base name of its program or script)',
    ],
    [
      'an unknown key',
      '{process: nova-compute, port: 5672}',
      's.yaml:6: containers.web.healthchecks[0].established.port: unknown key "port" (allowed: process, ports)',
    ],
  ];
  it.each(cases)('rejects %s', async (_name, value, message) => {
    const got = await problems(container(`healthchecks: [{name: amqp, established: ${value}}]`));
    expect(got).toContain(message);
  });
});

describe('bootstrap tasks', () => {
  it('run through the container start with environment, or replace the command', async () => {
    const c = await loadOne(
      container(
        'bootstrap:',
        "  - {name: db-sync, environment: {KOLLA_BOOTSTRAP: '', KOLLA_UPGRADE: 'yes'}, timeout: 5m}",
        '  - {name: legacy, command: [nova-manage, db, sync]}',
        '  - {name: both, command: [x], environment: {A: b}}',
      ),
    );
    expect(c.bootstrap).toEqual([
      {
        name: 'db-sync',
        environment: { KOLLA_BOOTSTRAP: '', KOLLA_UPGRADE: 'yes' },
        timeoutMs: 300_000,
        acceptExitCodes: [0],
      },
      { name: 'legacy', command: ['nova-manage', 'db', 'sync'], timeoutMs: 600_000, acceptExitCodes: [0] },
      { name: 'both', command: ['x'], environment: { A: 'b' }, timeoutMs: 600_000, acceptExitCodes: [0] },
    ]);
  });

  it('rejects a task with neither command nor environment, and a bad variable name', async () => {
    expect(await problems(container('bootstrap:', '  - {name: nothing}'))).toEqual([
      's.yaml:7: containers.web.bootstrap[0]: needs command (replaces the container command) or environment (the container starts as usual, e.g. kolla_start with KOLLA_BOOTSTRAP)',
    ]);
    expect(await problems(container("bootstrap: [{name: t, environment: {'1BAD': x}}]"))).toEqual([
      's.yaml:6: containers.web.bootstrap[0].environment.1BAD: "1BAD" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
    ]);
  });
});

describe('the shipped compute set on a real Kolla 2024.1 host', () => {
  it("checks nova-compute's RabbitMQ connection, not a listener, and hands its trees to nova", async () => {
    const { containers } = await shippedCompute();
    const nova = containers.find((c) => c.name === 'nova_compute')!;
    expect(nova.healthchecks.find((c) => c.name === 'amqp')?.probe).toEqual({
      kind: 'established',
      process: 'nova-compute',
      ports: [5672],
    });
    expect(nova.permissions).toEqual([
      { path: '/var/log/kolla/nova', owner: 'nova:nova', recurse: true },
      { path: '/var/lib/nova', owner: 'nova:nova', recurse: true },
    ]);
  });

  it('gives every container that starts through kolla_start a command, and persists /etc/libvirt/qemu', async () => {
    const { containers } = await shippedCompute();
    for (const c of containers) expect(c.command?.length, c.name).toBeGreaterThan(0);
    expect(containers.map((c) => c.name)).toEqual(
      expect.arrayContaining(['openvswitch_db', 'openvswitch_vswitchd']),
    );
    const libvirt = containers.find((c) => c.name === 'nova_libvirt')!;
    // kolla-ansible's named volume: the domain definitions outlive every libvirt container.
    expect(libvirt.binds.find((b) => b.target === '/etc/libvirt/qemu')).toEqual({
      kind: 'volume',
      source: 'nova_libvirt_qemu',
      target: '/etc/libvirt/qemu',
      readOnly: false,
    });
  });
});
