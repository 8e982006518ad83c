import { describe, expect, it } from 'vitest';
import { createBody } from '../../agent/engine/create-options.js';
import { specHash } from '../../agent/model/hash.js';
import { volumeNames, type BindMount } from '../../agent/model/spec.js';
import { vmSafetyViolations } from '../../agent/model/vm-safety.js';
import { containerSpec } from '../support/spec.js';
import {
  cleanupAfterEach,
  container,
  containerProblems,
  loadOne,
  WEB_IDENTITY,
} from '../fixtures/spec/helpers.js';

cleanupAfterEach();

const problems = containerProblems;
const IDENTITY = WEB_IDENTITY;

describe('named volumes in binds', () => {
  it('reads the short form as Docker and kolla-ansible write it, and the long form', async () => {
    const spec = await loadOne(
      container(
        'binds:',
        '  - kolla_logs:/var/log/kolla/',
        '  - nova_libvirt_qemu:/etc/libvirt/qemu:ro',
        '  - libvirtd:/var/lib/libvirt:rw',
        '  - /run:/run:shared',
        '  - { source: nova_compute, target: /var/lib/nova/, read_only: true }',
        '  - { source: /var/lib/nova/mnt, target: /var/lib/nova/mnt/, propagation: shared }',
      ),
    );
    // Sorted by target, each without its trailing "/"; a host bind has no kind (absent: a host path).
    expect(spec.binds).toEqual([
      { kind: 'volume', source: 'nova_libvirt_qemu', target: '/etc/libvirt/qemu', readOnly: true },
      { source: '/run', target: '/run', readOnly: false, propagation: 'shared' },
      { kind: 'volume', source: 'libvirtd', target: '/var/lib/libvirt', readOnly: false },
      { kind: 'volume', source: 'nova_compute', target: '/var/lib/nova', readOnly: true },
      { source: '/var/lib/nova/mnt', target: '/var/lib/nova/mnt', readOnly: false, propagation: 'shared' },
      { kind: 'volume', source: 'kolla_logs', target: '/var/log/kolla', readOnly: false },
    ]);
    expect(spec.binds.filter((b) => 'kind' in b)).toHaveLength(4);
    expect(volumeNames(spec)).toEqual(['kolla_logs', 'libvirtd', 'nova_compute', 'nova_libvirt_qemu']);
  });

  it('hashes a trailing "/" on a target as the same bind, and a volume unlike a host path', async () => {
    const slash = await loadOne(container('binds: ["/var/lib/nova:/var/lib/nova/"]'));
    const plain = await loadOne(container('binds: ["/var/lib/nova:/var/lib/nova"]'));
    const volume = await loadOne(container('binds: ["nova_compute:/var/lib/nova"]'));
    const short = await loadOne(container('binds: ["nova_compute:/var/lib/nova/:rw"]'));
    expect(specHash(slash)).toBe(specHash(plain));
    expect(specHash(volume)).not.toBe(specHash(plain));
    expect(specHash(short)).toBe(specHash(volume));
  });

  it('gives the engine the volume by name, with no propagation', async () => {
    const spec = await loadOne(container('binds: ["kolla_logs:/var/log/kolla/:ro", "/run:/run:shared"]'));
    expect(createBody({ spec, identity: IDENTITY }).HostConfig.Binds).toEqual([
      '/run:/run:rw,shared',
      'kolla_logs:/var/log/kolla:ro',
    ]);
  });

  it('refuses a propagation on a volume, naming the file, line and field', async () => {
    expect(await problems('binds: ["kolla_logs:/var/log/kolla:rw,rshared"]')).toEqual([
      's.yaml:5: containers.web.binds[0]: propagation rshared applies to a host path only; volume kolla_logs takes ro or rw',
    ]);
    expect(
      await problems(
        'binds:',
        '  - /run:/run',
        '  - { source: libvirtd, target: /var/lib/libvirt, propagation: shared }',
      ),
    ).toEqual([
      's.yaml:7: containers.web.binds[1].propagation: propagation shared applies to a host path only; volume libvirtd takes ro or rw',
    ]);
  });

  it('refuses a relative path that is no volume name, saying what is allowed', async () => {
    const allowed = 'is not an absolute host path or a volume name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)';
    expect(await problems('binds: ["./x:/x", "a/b:/b", "_x:/y", "v:/z"]')).toEqual([
      `s.yaml:5: containers.web.binds[0]: "./x" ${allowed}`,
      `s.yaml:5: containers.web.binds[1]: "a/b" ${allowed}`,
      `s.yaml:5: containers.web.binds[2]: "_x" ${allowed}`,
      `s.yaml:5: containers.web.binds[3]: "v" ${allowed}`,
    ]);
    expect(await problems('binds: [{ source: ../logs, target: /x }]')).toEqual([
      `s.yaml:5: containers.web.binds[0].source: "../logs" ${allowed}`,
    ]);
  });

  it('refuses a volume on a target another mount has, the trailing "/" dropped first', async () => {
    expect(await problems('binds: ["kolla_logs:/var/log/kolla/", "/var/log/kolla:/var/log/kolla"]')).toEqual([
      's.yaml:5: containers.web.binds[1]: target /var/log/kolla is already mounted by containers.web.binds[0]',
    ]);
  });

  it('counts a volume as persistent for the VM-safety rules, but not as the cgroup bind', () => {
    const rules = (binds: readonly BindMount[]): string[] =>
      vmSafetyViolations(
        containerSpec('nova_libvirt', {
          role: 'hypervisor',
          pid: 'host',
          network: 'host',
          cgroupns: 'host',
          binds,
        }),
        { hybridWithControllers: false, unifiedOnly: false },
      ).map((v) => v.rule);
    const run = { source: '/run', target: '/run', readOnly: false };
    const cgroup = { source: '/sys/fs/cgroup', target: '/sys/fs/cgroup', readOnly: false };
    const libvirtd = {
      kind: 'volume',
      source: 'libvirtd',
      target: '/var/lib/libvirt',
      readOnly: false,
    } as const;
    expect(rules([run, cgroup, libvirtd])).toEqual([]);
    expect(rules([run, cgroup])).toEqual(['persistent-var-lib-libvirt']);
    const cgroupVolume = { kind: 'volume', source: 'cg', target: '/sys/fs/cgroup', readOnly: false } as const;
    expect(rules([run, cgroupVolume, libvirtd])).toEqual(['cgroup-bind']);
  });
});
