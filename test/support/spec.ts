import type { ContainerSpec } from '../../agent/model/spec.js';

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
