/**
 * The real-VM set of the libvirt end-to-end test (container-sets-e2e/) against
 * the VM-safety rules, and the guard's answers for it with fakes at the
 * executor's boundary: the end-to-end test only checks the refusal of a
 * downgrade (a forced one would orphan its guest), so the forced answer and
 * its cost are checked here.
 */
import { describe, expect, it } from 'vitest';
import { isSpcdError, type SpcdError } from '../../agent/errors.js';
import { checkVmSafety, type VmSafetyDeps } from '../../agent/executor/guard.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import { vmSafetyViolations } from '../../agent/model/vm-safety.js';
import { loadDesired } from '../../agent/spec/load.js';
import { EventBus } from '../../agent/model/events.js';
import { REPO } from '../support/daemon.js';
import { FakeClock } from '../support/fake-clock.js';

async function e2eSpec(): Promise<ContainerSpec> {
  const desired = await loadDesired({ setsDir: `${REPO}/container-sets-e2e` });
  const spec = allContainers(desired.sets).find((c) => c.name === 'spcd_e2e_libvirt');
  if (!spec) throw new Error('spcd_e2e_libvirt not defined');
  return spec;
}

const VMS = [{ pid: 4242, name: 'qemu-1-e2e-guest' }];

function fakes(spec: ContainerSpec, runningVersion: string): VmSafetyDeps {
  return {
    state: { generation: () => ({ spec }) },
    vms: { runningVms: async () => VMS },
    // A refusal is published on the bus (it feeds spcd_vm_safety_refusals_total).
    events: new EventBus(),
    clock: new FakeClock(),
    engine: {
      imageInfo: async () => ({
        id: 'sha256:old',
        repoDigests: [],
        labels: { 'org.opencontainers.image.version': runningVersion },
      }),
    },
  };
}

const old: ObservedContainer = {
  id: 'c1',
  name: 'spcd_e2e_libvirt',
  identity: {
    instance: 'i',
    set: 'libvirt-e2e',
    container: 'spcd_e2e_libvirt',
    generation: 2,
    specHash: 'h',
    configHash: 'none',
  },
  state: 'running',
  image: 'spcd-e2e/libvirt:trixie',
  imageId: 'sha256:old',
  startedAt: '',
  finishedAt: '',
  exitCode: 0,
  pid: 100,
};
const V9 = { 'org.opencontainers.image.version': '9.0.0' };
const V11 = { 'org.opencontainers.image.version': '11.3.0' };

describe('the libvirt e2e set and the VM-safety guard', () => {
  it('the shipped real-VM set keeps every rule, on a hybrid and on a v2-only host', async () => {
    const spec = await e2eSpec();
    expect(spec.role).toBe('hypervisor');
    expect(spec.privileged).toBe(false);
    expect(vmSafetyViolations(spec, { hybridWithControllers: true, unifiedOnly: false })).toEqual([]);
    expect(vmSafetyViolations(spec, { hybridWithControllers: false, unifiedOnly: true })).toEqual([]);
    expect(spec.binds.map((b) => b.target)).toEqual(
      expect.arrayContaining(['/etc/libvirt/qemu', '/var/cache/libvirt', '/run/libvirt', '/var/lib/libvirt']),
    );
  });

  it('refuses 11.3.0 -> 9.0.0 while VMs run, naming the VMs and the cost', async () => {
    const spec = await e2eSpec();
    const err = await checkVmSafety(fakes(spec, '11.3.0'), spec, old, V9, false).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'VM_SAFETY_REFUSED')).toBe(true);
    const e = err as SpcdError;
    expect(e.details.rule).toBe('no-downgrade-with-vms');
    expect(e.message).toContain('from 11.3.0 to 9.0.0');
    expect(e.message).toContain('qemu-1-e2e-guest(pid 4242)');
    expect(e.message).toContain('Use force');
  });

  it('forced, answers with a warning that says what the downgrade costs', async () => {
    const spec = await e2eSpec();
    const warnings = await checkVmSafety(fakes(spec, '11.3.0'), spec, old, V9, true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^forced downgrade: /);
    expect(warnings[0]).toContain('qemu-1-e2e-guest(pid 4242)');
    expect(warnings[0]).toMatch(/invisible to the older hypervisor 9\.0\.0/);
    expect(warnings[0]).toMatch(/restarted or migrated/);
  });

  it('lets the same version and an upgrade through, and never forces a definition without the cgroup bind', async () => {
    const spec = await e2eSpec();
    expect(await checkVmSafety(fakes(spec, '11.3.0'), spec, old, V11, false)).toEqual([]);
    expect(await checkVmSafety(fakes(spec, '9.0.0'), spec, old, V11, false)).toEqual([]);
    const broken = { ...spec, binds: spec.binds.filter((b) => b.target !== '/sys/fs/cgroup') };
    const err = await checkVmSafety(fakes(spec, '11.3.0'), broken, old, V11, true).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'VM_SAFETY_REFUSED')).toBe(true);
    expect((err as SpcdError).message).toContain('cgroup-bind');
  });
});

describe('the real-VM set: census and the qemu capabilities warm-up', () => {
  it('lists domains by UUID, and warms the cache from a libvirtd that cannot see the running one', async () => {
    const spec = await e2eSpec();
    expect(spec.census).toEqual({
      argv: ['virsh', '-c', 'qemu:///system', 'list', '--uuid'],
      timeoutMs: 10_000,
    });
    expect(spec.bootstrap.map((t) => t.name)).toEqual(['warm-qemu-caps']);
    const script = spec.bootstrap[0]!.command!.join(' ');
    // its own mount namespace, private: nothing it mounts reaches the host (a Kolla /run:/run:shared bind)
    expect(script).toContain('exec unshare --mount --propagation private');
    // the running libvirt's sockets, domain status and definitions hidden; only /var/cache/libvirt is shared
    expect(script).toMatch(
      /for d in \/run\/libvirt \/var\/lib\/libvirt \/etc\/libvirt\/qemu; do\s+mount -t tmpfs/,
    );
    expect(spec.binds.map((b) => b.target)).toContain('/var/cache/libvirt');
    // every qemu binary (capabilities), not only the default one (domcapabilities)
    expect(script).toContain('virsh -c qemu:///system capabilities');
  });
});
