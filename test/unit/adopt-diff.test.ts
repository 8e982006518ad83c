import { describe, expect, it } from 'vitest';
import { runtimeDifferences, type InspectedRuntime } from '../../agent/engine/adopt-diff.js';
import { createBody } from '../../agent/engine/create-options.js';
import { scannedProcess, scannedSecurityOpt } from '../../agent/engine/unlabeled.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { containerSpec } from '../support/spec.js';

/**
 * How a running container (as `docker inspect` shows one kolla_container
 * made) is compared with the definition that would create it: the engine's
 * spellings of defaults and of binds without a mode are not differences; a
 * real difference is named with both values.
 */
const SPEC: ContainerSpec = containerSpec('nova_libvirt', {
  image: 'kolla/nova-libvirt:2024.1',
  privileged: false,
  pid: 'host',
  network: 'host',
  cgroupns: 'host',
  capAdd: ['ALL'],
  capDrop: ['SYS_RESOURCE'],
  environment: { KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS', KOLLA_SERVICE_NAME: 'nova-libvirt' },
  binds: [
    { source: '/etc/kolla/nova-libvirt/', target: '/var/lib/kolla/config_files/', readOnly: true },
    { source: '/run', target: '/run', readOnly: false, propagation: 'shared' },
    { kind: 'volume', source: 'libvirtd', target: '/var/lib/libvirt', readOnly: false },
  ],
  ulimits: [{ name: 'memlock', soft: 67108864, hard: 67108864 }],
});
const identity = {
  instance: 'i',
  set: 's',
  container: 'nova_libvirt',
  generation: 1,
  specHash: 'h',
  configHash: 'none',
};
const body = createBody({ spec: SPEC, identity });
const IMAGE_ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=en_US.UTF-8'];
/** The image's own settings (`docker image inspect`): kolla_start under dumb-init, root. */
const IMAGE = { Env: IMAGE_ENV, Entrypoint: ['dumb-init', '--single-child', '--'], Cmd: ['kolla_start'] };

/** What docker inspect shows for the container kolla_container made from the same parameters. */
function kollaMade(over: Partial<Record<string, unknown>> = {}, env: string[] = []): InspectedRuntime {
  return {
    Config: {
      Image: 'kolla/nova-libvirt:2024.1',
      Env: ['KOLLA_SERVICE_NAME=nova-libvirt', 'KOLLA_CONFIG_STRATEGY=COPY_ALWAYS', ...IMAGE_ENV, ...env],
      Entrypoint: ['dumb-init', '--single-child', '--'],
      Cmd: ['kolla_start'],
      User: '',
    },
    HostConfig: {
      Binds: [
        '/etc/kolla/nova-libvirt/:/var/lib/kolla/config_files/:ro',
        '/run:/run:shared',
        'libvirtd:/var/lib/libvirt',
      ],
      NetworkMode: 'host',
      PidMode: 'host',
      IpcMode: 'private',
      UTSMode: '',
      CgroupnsMode: 'host',
      Privileged: false,
      CapAdd: ['CAP_ALL'],
      CapDrop: ['sys_resource'],
      SecurityOpt: null,
      Devices: [],
      Tmpfs: null,
      Ulimits: [{ Name: 'memlock', Soft: 67108864, Hard: 67108864 }],
      Memory: 0,
      ShmSize: 67108864,
      PidsLimit: null,
      RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
      ...over,
    },
  };
}

describe('runtimeDifferences', () => {
  it("reads Podman's ulimit names as the definition's, and still names a different limit", () => {
    const podman = kollaMade({ Ulimits: [{ Name: 'RLIMIT_MEMLOCK', Soft: 67108864, Hard: 67108864 }] });
    expect(runtimeDifferences(SPEC, body, podman, IMAGE)).toEqual([]);
    const other = kollaMade({ Ulimits: [{ Name: 'RLIMIT_MEMLOCK', Soft: 1024, Hard: 1024 }] });
    expect(runtimeDifferences(SPEC, body, other, IMAGE).join('\n')).toMatch(/memlock=1024:1024/);
  });

  it("finds none when the definition reproduces the container, whatever the engine's spellings", () => {
    // ShmSize is Docker's default (64 MiB), not a choice: a definition without shm_size leaves it to Docker.
    expect(runtimeDifferences(SPEC, body, kollaMade(), IMAGE)).toEqual([]);
    const bigger = kollaMade({ ShmSize: 1 << 30 });
    expect(
      runtimeDifferences(
        { ...SPEC, shmSizeBytes: 1 << 29 },
        createBody({ spec: { ...SPEC, shmSizeBytes: 1 << 29 }, identity }),
        bigger,
        IMAGE,
      ),
    ).toEqual(['shm_size: definition 536870912, running 1073741824']);
  });

  it("reads Podman's binds, written with every option it applied, as the definition's", () => {
    const podman = kollaMade({
      Binds: [
        '/etc/kolla/nova-libvirt/:/var/lib/kolla/config_files/:ro,rprivate,rbind',
        '/run:/run:shared,rw,rbind',
        'libvirtd:/var/lib/libvirt:rprivate,rw,rbind',
      ],
    });
    expect(runtimeDifferences(SPEC, body, podman, IMAGE)).toEqual([]);
    const slave = kollaMade({ Binds: ['/run:/run:rslave,rw,rbind', 'libvirtd:/var/lib/libvirt:rw'] });
    expect(runtimeDifferences(SPEC, body, slave, IMAGE)).toEqual([
      expect.stringMatching(/^binds: definition .*running .*"\/run:\/run:rw:rslave"/),
    ]);
  });

  it('names each real difference with both values', () => {
    const running = kollaMade(
      {
        Privileged: true,
        Binds: ['/run:/run:shared', 'libvirtd:/var/lib/libvirt:ro'],
        RestartPolicy: { Name: 'unless-stopped' },
      },
      ['DEBUG=1'],
    );
    const found = runtimeDifferences(SPEC, body, running, IMAGE);
    expect(found).toEqual(
      expect.arrayContaining([
        'environment.DEBUG: definition none, running "1"',
        'privileged: definition none, running true',
        expect.stringMatching(
          /^binds: definition .*\/etc\/kolla\/nova-libvirt.*running \["\/run:\/run:rw:shared","libvirtd:\/var\/lib\/libvirt:ro"\]$/,
        ),
        expect.stringMatching(/^restart policy: running "unless-stopped"/),
      ]),
    );
  });

  it('says that a definition with spcd-rendered config cannot reproduce a container that binds its own', () => {
    const rendered: ContainerSpec = {
      ...SPEC,
      config: [
        {
          template: 't.j2',
          dest: 'x.conf',
          containerPath: '/etc/x.conf',
          owner: 'root',
          mode: '0600',
          format: 'ini',
        },
      ],
    };
    expect(
      runtimeDifferences(rendered, createBody({ spec: rendered, identity }), kollaMade(), IMAGE)[0],
    ).toMatch(/^config: /);
  });

  it('compares the image by reference', () => {
    const found = runtimeDifferences(
      SPEC,
      body,
      { ...kollaMade(), Config: { ...kollaMade().Config, Image: 'kolla/nova-libvirt:2023.2' } },
      IMAGE,
    );
    expect(found).toContain(
      'image: definition "kolla/nova-libvirt:2024.1", running "kolla/nova-libvirt:2023.2"',
    );
  });

  it("compares a command, entrypoint or user the definition leaves to the image with the image's own", () => {
    // kolla-ansible's `command:` on an image whose own command is another: an entry without it would lose it.
    const libvirtd = { ...IMAGE, Entrypoint: null, Cmd: ['/usr/sbin/libvirtd'] };
    const running = kollaMade();
    const made = { ...running, Config: { ...running.Config, Entrypoint: null, User: 'neutron' } };
    expect(runtimeDifferences(SPEC, body, made, libvirtd)).toEqual([
      `command: definition the image's ["/usr/sbin/libvirtd"], running ["kolla_start"]`,
      `user: definition the image's none, running "neutron"`,
    ]);
    const own = containerSpec('nova_libvirt', { ...SPEC, command: ['kolla_start'], user: 'neutron' });
    expect(runtimeDifferences(own, createBody({ spec: own, identity }), made, libvirtd)).toEqual([]);
  });
});

describe('systempaths=unconfined (an unmasked /proc)', () => {
  const unconfined = { MaskedPaths: [], ReadonlyPaths: [] };
  const masked = { MaskedPaths: ['/proc/kcore', '/proc/keys'], ReadonlyPaths: ['/proc/sys'] };
  const withOpt = { ...SPEC, securityOpt: ['systempaths=unconfined'] };
  const optBody = createBody({ spec: withOpt, identity });

  it('is a difference either way, named with both sides', () => {
    expect(runtimeDifferences(SPEC, body, kollaMade(unconfined), IMAGE)).toEqual([
      'security_opt systempaths=unconfined: definition no, running yes',
    ]);
    expect(runtimeDifferences(withOpt, optBody, kollaMade(masked), IMAGE)).toEqual([
      'security_opt systempaths=unconfined: definition yes, running no',
    ]);
  });

  it('is none when both agree, and does not apply to a privileged container', () => {
    expect(runtimeDifferences(withOpt, optBody, kollaMade(unconfined), IMAGE)).toEqual([]);
    expect(runtimeDifferences(SPEC, body, kollaMade(masked), IMAGE)).toEqual([]);
    const priv = { ...SPEC, privileged: true };
    expect(
      runtimeDifferences(
        priv,
        createBody({ spec: priv, identity }),
        kollaMade({ Privileged: true, ...unconfined }),
        IMAGE,
      ),
    ).toEqual([]);
  });

  it('is written by the scan where the container has it, beside its other options', () => {
    expect(scannedSecurityOpt({ SecurityOpt: ['label=disable'], ...unconfined })).toEqual([
      'label=disable',
      'systempaths=unconfined',
    ]);
    expect(scannedSecurityOpt({ SecurityOpt: null, ...masked })).toEqual([]);
    expect(scannedSecurityOpt({ Privileged: true, ...unconfined })).toEqual([]);
  });
});

describe('scannedProcess', () => {
  it("writes a command, entrypoint or user only where the container's is not the image's", () => {
    const libvirtd = { Env: [], Entrypoint: null, Cmd: ['/usr/sbin/libvirtd'] };
    expect(scannedProcess({ Image: 'x', Cmd: ['/usr/sbin/libvirtd'] }, libvirtd)).toEqual({});
    expect(scannedProcess({ Image: 'x', Cmd: ['kolla_start'], User: 'nova' }, libvirtd)).toEqual({
      command: ['kolla_start'],
      user: 'nova',
    });
    // An entrypoint of its own: the image's command is dropped, so an empty one is not written.
    expect(scannedProcess({ Image: 'x', Entrypoint: ['kolla_start'], Cmd: null }, libvirtd)).toEqual({
      entrypoint: ['kolla_start'],
    });
  });
});
