import type { CheckSpec, ContainerSpec } from '../../agent/model/spec.js';

/** A normalized ContainerSpec with spec/'s defaults, for tests that need one without YAML. */
export function containerSpec(name: string, over: Partial<ContainerSpec> = {}): ContainerSpec {
  return {
    name,
    set: 's',
    image: 'img:1',
    environment: {},
    privileged: false,
    pid: 'private',
    network: 'none',
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
    source: 'test:1',
    ...over,
  };
}

/** Two fixed specs for golden hash tests: spec/'s defaults only, and one that sets every hashed field. */
export const MINIMAL = containerSpec('golden');
export const RICH = containerSpec('nova_libvirt', {
  image: 'registry.local/kolla/nova-libvirt:2024.1',
  command: ['/usr/sbin/libvirtd', '--listen'],
  entrypoint: ['dumb-init', '--single-child', '--'],
  user: 'root',
  workingDir: '/var/lib/nova',
  environment: { KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS', TZ: 'UTC' },
  privileged: false,
  pid: 'host',
  network: 'host',
  ipc: 'host',
  uts: 'host',
  cgroupns: 'host',
  binds: [
    { source: '/run/libvirt', target: '/run/libvirt', readOnly: false, propagation: 'shared' },
    { source: '/etc/localtime', target: '/etc/localtime', readOnly: true },
  ],
  tmpfs: [{ target: '/tmp', options: 'size=64m' }],
  devices: [{ host: '/dev/kvm', container: '/dev/kvm', permissions: 'rwm' }],
  capAdd: ['NET_ADMIN', 'SYS_ADMIN'],
  capDrop: ['SYS_RESOURCE'],
  securityOpt: ['apparmor=unconfined'],
  ulimits: [{ name: 'nofile', soft: 65536, hard: 65536 }],
  sysctls: { 'net.ipv4.ip_forward': '1' },
  memoryBytes: 4294967296,
  shmSizeBytes: 67108864,
  init: true,
  labels: { team: 'compute' },
  stopSignal: 'SIGKILL',
  stopGraceMs: 30000,
  role: 'hypervisor',
});

/** Their hashes under scheme v1, computed by spcd 0.1's specHash before scheme v2 existed (frozen). */
export const GOLDEN_V1 = {
  minimal: 'v1-32549834b0042daff2b69c11bade42e2',
  rich: 'v1-42532617cdf417607a511b9067437d32',
} as const;

/** Kolla's AMQP check with the loader's defaults: `process` holds an ESTABLISHED connection on 5672. */
export function amqpCheck(process: string): CheckSpec {
  return {
    name: 'amqp',
    probe: { kind: 'established', process, ports: [5672] },
    schedule: { kind: 'interval', intervalMs: 30_000 },
    timeoutMs: 10_000,
    startPeriodMs: 0,
    failureThreshold: 3,
    successThreshold: 1,
    action: 'restart',
    maxOutputBytes: 4096,
  };
}
