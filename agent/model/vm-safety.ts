import { isVolumeBind, type ContainerSpec } from './spec.js';

/**
 * The rules a hypervisor container's definition must keep for VMs to survive
 * its stop (docs/explanation/vm-survival.md, from shared/design/libvirt-vm-survival.md).
 * Pure: host facts come in as data.
 */
export interface VmSafetyViolation {
  readonly rule: string;
  readonly why: string;
}

export interface HostCgroupFacts {
  /** A cgroup2 mount at /sys/fs/cgroup/unified lists controllers (a hybrid host). */
  readonly hybridWithControllers: boolean;
  /** The host runs cgroup v2 only. */
  readonly unifiedOnly: boolean;
}

export function vmSafetyViolations(spec: ContainerSpec, host: HostCgroupFacts): VmSafetyViolation[] {
  const v: VmSafetyViolation[] = [];
  if (spec.pid !== 'host') {
    v.push({
      rule: 'pid-host',
      why: "pid must be 'host': without it the VMs die with the container's PID namespace",
    });
  }
  if (!spec.binds.some((b) => b.target === '/sys/fs/cgroup' && !b.readOnly && !isVolumeBind(b))) {
    v.push({
      rule: 'cgroup-bind',
      why: 'a writable /sys/fs/cgroup host bind is required: without it qemu stays in the container cgroup and is killed on stop',
    });
  }
  if (!persistent(spec, '/run/libvirt')) {
    v.push({
      rule: 'persistent-run-libvirt',
      why: '/run/libvirt must be a host bind or a named volume: otherwise the new libvirtd reports running VMs as shut off',
    });
  }
  if (!persistent(spec, '/var/lib/libvirt')) {
    v.push({
      rule: 'persistent-var-lib-libvirt',
      why: '/var/lib/libvirt must be a host bind or a named volume: qemu monitor sockets and domain state live there',
    });
  }
  if (spec.network !== 'host') {
    v.push({
      rule: 'net-host',
      why: "network must be 'host': otherwise VMs are stranded in the old network namespace",
    });
  }
  if (
    host.hybridWithControllers &&
    spec.cgroupns !== 'host' &&
    !spec.tmpfs.some((t) => t.target === '/sys/fs/cgroup/unified')
  ) {
    v.push({
      rule: 'hide-unified-cgroup',
      why: 'on this hybrid cgroup host, hide /sys/fs/cgroup/unified (tmpfs) or use cgroupns host: runc would SIGKILL the VMs',
    });
  }
  if (host.unifiedOnly && spec.cgroupns !== 'host') {
    v.push({ rule: 'cgroupns-host', why: 'on a cgroup v2 host libvirt needs cgroupns host' });
  }
  return v;
}

/** A bind (host path or named volume: both outlive the container) covers `path` when its target is the path or a parent of it. */
function persistent(spec: ContainerSpec, path: string): boolean {
  return spec.binds.some((b) => b.target === path || path.startsWith(`${b.target.replace(/\/+$/, '')}/`));
}

/** Compares dotted numeric versions; undefined when either is not comparable. */
export function compareVersions(a: string | undefined, b: string | undefined): number | undefined {
  if (!a || !b) return undefined;
  const pa = a.split(/[.-]/).map((x) => Number.parseInt(x, 10));
  const pb = b.split(/[.-]/).map((x) => Number.parseInt(x, 10));
  if (pa.some(Number.isNaN) || pb.some(Number.isNaN)) return undefined;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

export const VERSION_LABEL = 'org.opencontainers.image.version';
