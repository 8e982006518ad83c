import { describe, expect, it } from 'vitest';
import {
  engineKind,
  eventAction,
  forPodman,
  healthStatus,
  podmanRefusal,
  ulimitName,
} from '../../agent/engine/dialect.js';
import { SpcdError } from '../../agent/errors.js';
import { giveUpReason } from '../../agent/reconciler/steps.js';

describe("the engine's dialect: Docker's names and Podman's read alike", () => {
  it("reads Podman's event names as Docker's", () => {
    expect(eventAction('remove')).toBe('destroy');
    expect(eventAction('died')).toBe('die');
    expect(eventAction('destroy')).toBe('destroy');
    expect(eventAction('die')).toBe('die');
    expect(eventAction('exec_start: sh -c true')).toBe('exec_start');
    expect(eventAction(undefined)).toBe('');
  });

  it("reads the health status from State.Health or Podman's State.Healthcheck", () => {
    expect(healthStatus({ Health: { Status: 'healthy' } })).toBe('healthy');
    expect(healthStatus({ Healthcheck: { Status: 'unhealthy' } })).toBe('unhealthy');
    expect(healthStatus({ Health: null, Healthcheck: null })).toBeUndefined();
    expect(healthStatus({})).toBeUndefined();
  });

  it("reads Podman's ulimit names (RLIMIT_NOFILE) as Docker's (nofile)", () => {
    expect(ulimitName('RLIMIT_NOFILE')).toBe('nofile');
    expect(ulimitName('RLIMIT_MEMLOCK')).toBe('memlock');
    expect(ulimitName('nofile')).toBe('nofile');
  });

  it('tells Podman from Docker by the components /version lists', () => {
    expect(engineKind({ Components: [{ Name: 'Podman Engine' }, { Name: 'Conmon' }] })).toBe('podman');
    expect(engineKind({ Components: [{ Name: 'Engine' }, { Name: 'containerd' }] })).toBe('docker');
    expect(engineKind({})).toBe('docker');
  });

  it('mounts each tmpfs empty on Podman, as Docker does, unless its options choose', () => {
    const body = {
      HostConfig: {
        Tmpfs: { '/sys/fs/cgroup/unified': '', '/run/x': 'size=64m', '/run/y': 'tmpcopyup,size=1m' },
        NetworkMode: 'host',
      },
    };
    expect(forPodman(body).HostConfig).toEqual({
      Tmpfs: {
        '/sys/fs/cgroup/unified': 'notmpcopyup',
        '/run/x': 'size=64m,notmpcopyup',
        '/run/y': 'tmpcopyup,size=1m',
      },
      NetworkMode: 'host',
    });
    expect(body.HostConfig.Tmpfs['/run/x']).toBe('size=64m');
    const none = { HostConfig: { NetworkMode: 'none' } };
    expect(forPodman(none)).toBe(none);
  });

  it('refuses, before any create on Podman, an init process in the host PID namespace, naming the field', () => {
    const hv = { name: 'nova_libvirt', source: 'container-sets/compute.yaml:9', init: true, pid: 'host' };
    const why = podmanRefusal(hv);
    expect(why).toContain(
      'container nova_libvirt (container-sets/compute.yaml:9): init: true with pid: host',
    );
    expect(why).toContain('containers.nova_libvirt.init: false');
    expect(podmanRefusal({ ...hv, init: false })).toBeUndefined();
    expect(podmanRefusal({ ...hv, pid: 'private' })).toBeUndefined();
    expect(podmanRefusal({ name: 'x', source: 'x.yaml:1' })).toBeUndefined();
  });

  it('gives up on creating a definition the engine cannot run, not on replacing one or a removal', () => {
    const err = new SpcdError('ENGINE_UNSUPPORTED', 'init: true with pid: host');
    const step = (kind: string) =>
      ({ kind, container: 'x' }) as unknown as Parameters<typeof giveUpReason>[0];
    const create = step('create');
    expect(giveUpReason(create, err)).toBe('init: true with pid: host');
    expect(giveUpReason(step('replace'), err)).toBeNull();
    expect(giveUpReason(step('remove'), err)).toBeNull();
    expect(giveUpReason(create, new SpcdError('ENGINE_FAILED', 'no'))).toBeNull();
  });
});
