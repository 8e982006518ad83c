import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { specHash } from '../../agent/model/hash.js';
import { startOrder } from '../../agent/model/order.js';
import { allContainers, findSet } from '../../agent/model/spec.js';
import { formatProblem, loadDesired, validateDir } from '../../agent/spec/load.js';
import { cleanupAfterEach, LIBRARY_FILE, loadOne, writeDir } from '../fixtures/spec/helpers.js';

cleanupAfterEach();

const GOOD = new URL('../fixtures/spec/good', import.meta.url).pathname;

describe('loading the good fixture', () => {
  it('builds the set tree with full set paths and file:line sources', async () => {
    const desired = await loadDesired({ setsDir: GOOD, checkLibraryFile: LIBRARY_FILE });
    expect(desired.sets.map((s) => s.path)).toEqual(['compute', 'demo']);
    expect(desired.hostValues).toBeUndefined();
    const compute = findSet(desired.sets, 'compute')!;
    expect(compute).toMatchObject({
      name: 'compute',
      description: 'Nova compute with libvirt',
      defaults: { nova: { debug: false } },
      source: `${GOOD}/compute.yaml:2`,
    });
    const neutron = findSet(desired.sets, 'compute/neutron')!;
    expect(neutron).toMatchObject({
      name: 'neutron',
      path: 'compute/neutron',
      source: `${GOOD}/compute.yaml:81`,
    });
    expect(neutron.containers.map((c) => [c.name, c.set, c.source])).toEqual([
      ['neutron_ovs_agent', 'compute/neutron', `${GOOD}/compute.yaml:84`],
    ]);
    expect(allContainers(desired.sets).map((c) => c.name)).toEqual([
      'nova_libvirt',
      'nova_compute',
      'neutron_ovs_agent',
      'demo_web',
    ]);
  });

  it('normalizes every field of the hypervisor container', async () => {
    const desired = await loadDesired({ setsDir: GOOD, checkLibraryFile: LIBRARY_FILE });
    const libvirt = allContainers(desired.sets).find((c) => c.name === 'nova_libvirt')!;
    expect(libvirt).toMatchObject({
      set: 'compute',
      image: 'kolla/nova-libvirt:2024.1',
      command: ['libvirtd', '--listen'],
      user: 'root',
      workingDir: '/var/lib/libvirt',
      environment: { DEBUG: 'false', KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS', RETRIES: '3' },
      privileged: true,
      pid: 'host',
      network: 'host',
      ipc: 'shareable',
      uts: 'host',
      cgroupns: 'host',
      capAdd: ['NET_ADMIN', 'SYS_ADMIN'],
      capDrop: ['ALL'],
      securityOpt: ['apparmor=unconfined'],
      ulimits: [
        { name: 'memlock', soft: -1, hard: -1 },
        { name: 'nofile', soft: 65536, hard: 65536 },
      ],
      sysctls: { 'kernel.shmmax': '68719476736' },
      memoryBytes: 64 * 1024 * 1024,
      shmSizeBytes: 1024 ** 3,
      init: false,
      labels: { 'com.example.team': 'compute' },
      stopSignal: 'SIGTERM',
      stopGraceMs: 120_000,
      role: 'hypervisor',
      source: `${GOOD}/compute.yaml:8`,
    });
    expect(Object.keys(libvirt.environment)).toEqual(['DEBUG', 'KOLLA_CONFIG_STRATEGY', 'RETRIES']);
    expect(libvirt.binds).toEqual([
      { source: '/lib/modules', target: '/lib/modules', readOnly: true },
      { source: '/run', target: '/run', readOnly: false, propagation: 'shared' },
      { source: '/sys/fs/cgroup', target: '/sys/fs/cgroup', readOnly: false },
      { source: '/var/lib/libvirt', target: '/var/lib/libvirt', readOnly: false, propagation: 'rshared' },
    ]);
    expect(libvirt.tmpfs).toEqual([
      { target: '/sys/fs/cgroup/unified', options: '' },
      { target: '/tmp', options: 'size=64m' },
    ]);
    expect(libvirt.devices).toEqual([
      { host: '/dev/kvm', container: '/dev/kvm', permissions: 'rwm' },
      { host: '/dev/net/tun', container: '/dev/net/tun', permissions: 'rwm' },
      { host: '/dev/vhost-net', container: '/dev/vhost-net', permissions: 'rw' },
    ]);
    expect(libvirt.config).toEqual([
      {
        template: 'nova/libvirtd.conf.j2',
        dest: 'libvirtd.conf',
        containerPath: '/etc/libvirt/libvirtd.conf',
        owner: 'root',
        mode: '0600',
        format: 'ini',
      },
      {
        template: 'nova/qemu.conf.j2',
        dest: 'qemu.conf',
        containerPath: '/etc/libvirt/qemu.conf',
        owner: 'nova:nova',
        mode: '0640',
        format: 'text',
      },
    ]);
  });

  it('reads checks of every probe kind, with defaults and library templates', async () => {
    const desired = await loadDesired({ setsDir: GOOD, checkLibraryFile: LIBRARY_FILE });
    const [libvirt, compute] = allContainers(desired.sets);
    expect(libvirt!.healthchecks).toEqual([
      {
        name: 'libvirt',
        probe: { kind: 'exec', argv: ['virsh', 'version', '--daemon'] },
        schedule: { kind: 'interval', intervalMs: 30_000 },
        timeoutMs: 10_000,
        startPeriodMs: 60_000,
        failureThreshold: 5,
        successThreshold: 2,
        action: 'none',
        maxOutputBytes: 4096,
      },
      {
        name: 'socket',
        probe: { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_socket', '/run/libvirt/libvirt-sock'] },
        schedule: { kind: 'interval', intervalMs: 10_000 },
        timeoutMs: 5000,
        startPeriodMs: 0,
        failureThreshold: 3,
        successThreshold: 1,
        action: 'restart',
        maxOutputBytes: 4096,
      },
    ]);
    expect(compute!.healthchecks.map((c) => [c.name, c.probe, c.schedule])).toEqual([
      ['proc', { kind: 'process', comm: 'nova-compute' }, { kind: 'cron', expression: '*/10 * * * * *' }],
      [
        'api',
        { kind: 'http', url: 'http://127.0.0.1:8775/', expectStatus: [200, 204] },
        { kind: 'interval', intervalMs: 10_000 },
      ],
      ['amqp', { kind: 'tcp', host: '127.0.0.1', port: 5672 }, { kind: 'interval', intervalMs: 10_000 }],
      [
        'sh',
        { kind: 'exec', argv: ['/bin/sh', '-c', 'test -e /run/nova.pid'] },
        { kind: 'interval', intervalMs: 10_000 },
      ],
    ]);
    expect(compute!.dependsOn).toEqual(['nova_libvirt']);
    expect(compute!.bootstrap).toEqual([
      {
        name: 'db_sync',
        command: ['nova-manage', 'db', 'sync'],
        timeoutMs: 300_000,
        acceptExitCodes: [0, 2],
      },
      {
        name: 'cells',
        command: ['nova-manage', 'cell_v2', 'discover_hosts'],
        timeoutMs: 600_000,
        acceptExitCodes: [0],
      },
    ]);
    const order = startOrder(compute ? [compute, libvirt!] : []);
    expect('order' in order && order.order.map((c) => c.name)).toEqual(['nova_libvirt', 'nova_compute']);
  });

  it('validateDir agrees with loadDesired', async () => {
    const { desired, problems } = await validateDir({ setsDir: GOOD, checkLibraryFile: LIBRARY_FILE });
    expect(problems).toEqual([]);
    expect(desired).toEqual(await loadDesired({ setsDir: GOOD, checkLibraryFile: LIBRARY_FILE }));
  });
});

describe('defaults', () => {
  it('fills every default for a container that gives only an image', async () => {
    const c = await loadOne('set: s\ncontainers:\n  web:\n    image: busybox\n');
    expect(c).toEqual({
      name: 'web',
      set: 's',
      image: 'busybox',
      environment: {},
      privileged: false,
      pid: 'private',
      network: 'bridge',
      ipc: 'private',
      uts: 'private',
      cgroupns: 'private',
      binds: [],
      tmpfs: [],
      devices: [],
      capAdd: [],
      capDrop: [],
      securityOpt: [],
      ulimits: [],
      sysctls: {},
      init: false,
      labels: {},
      stopSignal: 'SIGTERM',
      stopGraceMs: 10_000,
      dependsOn: [],
      healthchecks: [],
      role: 'service',
      config: [],
      bootstrap: [],
      source: expect.stringMatching(/s\.yaml:3$/) as unknown as string,
    });
  });

  it('fills check defaults', async () => {
    const c = await loadOne(
      'set: s\ncontainers:\n  web:\n    image: busybox\n    healthchecks: [{name: up, exec: [/bin/true]}]\n',
    );
    expect(c.healthchecks[0]).toEqual({
      name: 'up',
      probe: { kind: 'exec', argv: ['/bin/true'] },
      schedule: { kind: 'interval', intervalMs: 10_000 },
      timeoutMs: 5000,
      startPeriodMs: 0,
      failureThreshold: 3,
      successThreshold: 1,
      action: 'restart',
      maxOutputBytes: 4096,
    });
  });

  it('takes config format from the file name', async () => {
    const entries = ['a.conf', 'b.ini', 'c.yaml', 'd.yml', 'e.json', 'f.sh', 'policy']
      .map((d, i) => `      - {template: t${i}.j2, dest: ${d}, container_path: /etc/${d}}`)
      .join('\n');
    const c = await loadOne(
      `set: s\ncontainers:\n  web:\n    image: busybox\n    command: [x]\n    config:\n${entries}\n`,
    );
    expect(c.config.map((f) => f.format)).toEqual(['ini', 'ini', 'yaml', 'yaml', 'json', 'text', 'text']);
  });

  it('loads an empty directory as no sets, and ignores dot files and other extensions', async () => {
    const dir = await writeDir({
      '.hidden.yaml': 'not: valid: yaml: [',
      'README.md': '# no',
      'x.yaml.bak': 'junk',
    });
    expect(await loadDesired({ setsDir: dir })).toEqual({ sets: [] });
  });
});

describe('library templates', () => {
  it('lets an entry rename a template, override fields and replace its probe', async () => {
    const c = await loadOne(
      [
        'set: s',
        'containers:',
        '  web:',
        '    image: busybox',
        '    healthchecks:',
        '      - {use: port, name: amqp, args: [nova-compute, "5672"], interval: 30s, action: stop}',
        '      - {use: process, args: [nova-compute]}',
        '      - {use: curl, name: direct, http: "http://127.0.0.1/"}',
        '',
      ].join('\n'),
    );
    expect(c.healthchecks.map((h) => [h.name, h.probe, h.schedule, h.action])).toEqual([
      [
        'amqp',
        { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_port', 'nova-compute', '5672'] },
        { kind: 'interval', intervalMs: 30_000 },
        'stop',
      ],
      [
        'process',
        { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_process', 'nova-compute'] },
        { kind: 'interval', intervalMs: 10_000 },
        'restart',
      ],
      [
        'direct',
        { kind: 'http', url: 'http://127.0.0.1/', expectStatus: [] },
        { kind: 'interval', intervalMs: 10_000 },
        'restart',
      ],
    ]);
  });

  it('the shipped library names the six scripts', async () => {
    const c = await loadOne(
      [
        'set: s',
        'containers:',
        '  web:',
        '    image: busybox',
        '    healthchecks:',
        ...['port', 'listen', 'socket', 'curl', 'process', 'filemod'].map((n) => `      - {use: ${n}}`),
        '',
      ].join('\n'),
    );
    expect(c.healthchecks.map((h) => (h.probe.kind === 'exec' ? h.probe.argv : []))).toEqual(
      ['port', 'listen', 'socket', 'curl', 'process', 'filemod'].map((n) => [
        `/spcd/healthchecks/healthcheck_${n}`,
      ]),
    );
  });
});

describe('normalization and the spec hash', () => {
  const a = [
    'set: s',
    'containers:',
    '  web:',
    '    image: busybox:1.36',
    '    memory: 64m',
    '    environment: {B: "2", A: 1}',
    '    cap_add: [cap_sys_admin, NET_ADMIN, SYS_ADMIN]',
    '    binds: ["/b:/b:ro", "/a:/a"]',
    '    tmpfs: [/y, {target: /x, options: "size=1m"}]',
    '    devices: [/dev/net/tun, "/dev/kvm"]',
    '    ulimits: {nproc: 10, nofile: {soft: 5, hard: 9}}',
    '    sysctls: {net.b: "1", net.a: 2}',
    '    labels: {z: "1", a: "2"}',
    '    stop_grace_period: 10s',
    '',
  ].join('\n');
  const b = [
    'set: s',
    'containers:',
    '  web:',
    '    stop_grace_period: 10000',
    '    labels: {a: "2", z: 1}',
    '    sysctls: {net.a: "2", net.b: 1}',
    '    ulimits: {nofile: {hard: 9, soft: 5}, nproc: 10}',
    '    devices: [/dev/kvm, {host: /dev/net/tun}]',
    '    tmpfs: ["/x:size=1m", {target: /y}]',
    '    binds: [{target: /a, source: /a}, {source: /b, target: /b, read_only: true}]',
    '    cap_add: [NET_ADMIN, sys_admin]',
    '    environment: {A: "1", B: 2}',
    '    memory: 67108864',
    '    image: busybox:1.36',
    '',
  ].join('\n');

  it('gives deep-equal specs and equal hashes for reordered input and equal units ("64m" == 67108864)', async () => {
    const x = await loadOne(a);
    const y = await loadOne(b);
    const { source: _sx, ...restX } = x;
    const { source: _sy, ...restY } = y;
    expect(restX).toEqual(restY);
    expect(specHash(x)).toBe(specHash(y));
    expect(x.memoryBytes).toBe(67108864);
    expect(x.capAdd).toEqual(['NET_ADMIN', 'SYS_ADMIN']);
  });

  it('gives a different hash when a value really changes', async () => {
    const x = await loadOne(a);
    const y = await loadOne(a.replace('memory: 64m', 'memory: 65m'));
    expect(specHash(x)).not.toBe(specHash(y));
  });
});

describe('problems', () => {
  it('formatProblem prints file:line: path: message', () => {
    expect(
      formatProblem({
        file: 'container-sets/compute.yaml',
        line: 12,
        path: 'containers.nova_libvirt.pid',
        message: 'must be one of host, private',
        code: 'SPEC_INVALID',
      }),
    ).toBe('container-sets/compute.yaml:12: containers.nova_libvirt.pid: must be one of host, private');
    expect(
      formatProblem({ file: 'x.yaml', line: 0, path: '', message: 'is empty', code: 'SPEC_INVALID' }),
    ).toBe('x.yaml: is empty');
  });

  it('collects every problem of every file in one pass', async () => {
    const dir = await writeDir({
      'a.yaml': 'set: a\ncontainers:\n  web:\n    image: busybox\n    pid: hots\n',
      'b.yaml': 'set: b\ncontainers:\n  db:\n    image: busybox\n    ipc: none\n    uts: none\n',
    });
    const { desired, problems } = await validateDir({ setsDir: dir });
    expect(desired).toBeUndefined();
    expect(problems.map((p) => `${p.file.slice(dir.length + 1)}:${p.line}: ${p.path}`)).toEqual([
      'a.yaml:5: containers.web.pid',
      'b.yaml:5: containers.db.ipc',
      'b.yaml:6: containers.db.uts',
    ]);
  });
});

// The repository's own definitions must load: container-sets/ and each subdirectory
// holding set files; each file in container-sets/hosts/ is an override file that
// must apply cleanly to at least one of those directories.
const REPO_SETS = new URL('../../container-sets', import.meta.url).pathname;
const yamlIn = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && !f.startsWith('.')) : [];
const setDirs = existsSync(REPO_SETS)
  ? [
      REPO_SETS,
      ...readdirSync(REPO_SETS)
        .filter((d) => d !== 'hosts')
        .map((d) => join(REPO_SETS, d)),
    ].filter((d) => statSync(d).isDirectory() && yamlIn(d).length > 0)
  : [];
const hostFiles = yamlIn(join(REPO_SETS, 'hosts')).map((f) => join(REPO_SETS, 'hosts', f));

describe.runIf(setDirs.length > 0)("the repository's container-sets/", () => {
  it.each(setDirs)('%s loads without problems', async (dir) => {
    const { problems, desired } = await validateDir({ setsDir: dir, checkLibraryFile: LIBRARY_FILE });
    expect(problems.map(formatProblem)).toEqual([]);
    expect(desired?.sets.length).toBeGreaterThan(0);
  });

  it.runIf(hostFiles.length > 0).each(hostFiles)(
    'override %s applies to one of them',
    async (overridesFile) => {
      const results = await Promise.all(
        setDirs.map((setsDir) => validateDir({ setsDir, overridesFile, checkLibraryFile: LIBRARY_FILE })),
      );
      const ok = results.filter((r) => r.problems.length === 0);
      expect(ok.length, results.flatMap((r) => r.problems.map(formatProblem)).join('\n')).toBeGreaterThan(0);
    },
  );
});
