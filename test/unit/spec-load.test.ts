import { describe, expect, it } from 'vitest';
import { startOrder } from '../../agent/model/order.js';
import { allContainers, findSet } from '../../agent/model/spec.js';
import { loadDesired, validateDir } from '../../agent/spec/load.js';
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
      devpts: [],
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
