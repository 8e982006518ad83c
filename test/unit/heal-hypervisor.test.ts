import { afterEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { DEFAULT_BACKOFF } from '../../agent/model/backoff.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { ContainerLedger } from '../../agent/reconciler/ledger.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeEngine } from '../support/fake-engine.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired } from '../support/fake-reconciler.js';
import { BY_HEAL } from '../support/planner.js';
import { containerSpec } from '../support/spec.js';
import { stepRunner } from '../support/steps.js';

/**
 * A heal's restart of a hypervisor (a failing check's `action: restart`)
 * stops it as the operator's restart does: the VM-safety guard before the
 * stop while VMs run, the domain census around it. One that no longer runs
 * has nothing to stop. Fake engine, fake clock, the step run through the
 * executor table as the launcher runs it (its ledger effects around it).
 */
const U1 = '8f2c1a9e-0000-4000-8000-000000000001';
const CENSUS = { argv: ['virsh', 'list', '--uuid'], timeoutMs: 2_000 };
/** A hypervisor whose definition breaks the VM-safety rules (no pid host, no cgroup bind...). */
const UNSAFE = containerSpec('nova_libvirt', { role: 'hypervisor' });
/** A hypervisor whose definition keeps VMs alive (every rule of model/vm-safety.ts kept), with a census. */
const SAFE = containerSpec('nova_libvirt', {
  role: 'hypervisor',
  pid: 'host',
  network: 'host',
  binds: ['/sys/fs/cgroup', '/run/libvirt', '/var/lib/libvirt'].map((t) => ({
    source: t,
    target: t,
    readOnly: false,
  })),
  census: CENSUS,
});
const VMS = [{ pid: 4242, name: 'qemu-1-guest' }];
/** The census listings and stops, in order. */
const censusAndStops = (p: FakeProcess): string[] =>
  p.engine.calls.filter((c) => c.kind === 'exec' || c.kind === 'stop').map((c) => c.kind);

let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

async function setup(spec: ContainerSpec, vms: readonly { pid: number; name: string }[]) {
  const clock = new FakeClock();
  const p = await FakeProcess.create(new FakeEngine(clock), clock);
  proc = p;
  const first = await p.first(spec);
  const ledger = new ContainerLedger(DEFAULT_BACKOFF);
  ledger.unhealthy(spec.name, 'restart', 'probe failed', 'check probe failed 3 times', clock.now());
  const step = stepRunner(
    ledger,
    { ...p.deps, vms: { runningVms: () => Promise.resolve(vms) } },
    { operationId: 'heal-1' },
  );
  const heal = (observed: ObservedContainer) =>
    step({ kind: 'restart', desired: desired(spec), observed, reason: 'heal', origin: BY_HEAL });
  return { p, first, ledger, heal };
}

/** The container once it exited, as a listing would show it. */
async function exit(p: FakeProcess, o: ObservedContainer): Promise<ObservedContainer> {
  await p.engine.stop(o.id, 0);
  const exited = await p.engine.inspect(o.id);
  if (!exited) throw new Error(`${o.identity.container} is gone`);
  return exited;
}

describe("a heal's restart of a hypervisor", () => {
  it('that runs takes the VM-safety guard: refused while VMs run, nothing stopped, no restart counted', async () => {
    const { p, first, ledger, heal } = await setup(UNSAFE, VMS);
    const err = await heal(first).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'VM_SAFETY_REFUSED')).toBe(true);
    expect([p.engine.count('stop'), p.engine.byName('nova_libvirt')?.state]).toEqual([0, 'running']);
    expect(p.events).toContainEqual(
      expect.objectContaining({ type: 'vm-safety-refused', container: 'nova_libvirt', action: 'stop' }),
    );
    expect(ledger.of('nova_libvirt')).toMatchObject({ pendingHeal: null, restartCount: 0 });
  });

  it('whose definition keeps VMs alive is restarted while they run, the census around it', async () => {
    const { p, first, ledger, heal } = await setup(SAFE, VMS);
    p.engine.execResult = () => ({ exitCode: 0, timedOut: false, output: `${U1}\n`, durationMs: 1 });
    await heal(first);
    expect(censusAndStops(p)).toEqual(['exec', 'stop', 'exec']);
    expect(p.engine.byName('nova_libvirt')?.state).toBe('running');
    expect(p.events.some((e) => e.type === 'vm-safety-refused')).toBe(false);
    expect(ledger.of('nova_libvirt')).toMatchObject({ pendingHeal: null, restartCount: 1 });
  });

  it('that already exited takes no census: nothing ran to list before', async () => {
    const { p, first, heal } = await setup(SAFE, VMS);
    await heal(await exit(p, first));
    expect(p.engine.count('exec')).toBe(0);
    expect(p.engine.byName('nova_libvirt')?.state).toBe('running');
    expect(p.events.some((e) => e.type === 'census')).toBe(false);
  });

  it('that already exited needs no guard: nothing to stop, it is started', async () => {
    const { p, first, heal } = await setup(UNSAFE, VMS);
    await heal(await exit(p, first));
    expect(p.engine.byName('nova_libvirt')?.state).toBe('running');
    expect(p.events.some((e) => e.type === 'vm-safety-refused')).toBe(false);
  });

  it('that runs takes the domain census before the stop and after the start, under the heal', async () => {
    const spec = containerSpec('nova_libvirt', { role: 'hypervisor', census: CENSUS });
    const { p, first, heal } = await setup(spec, []);
    p.engine.execResult = () => ({ exitCode: 0, timedOut: false, output: `${U1}\n`, durationMs: 1 });
    await heal(first);
    expect(censusAndStops(p)).toEqual(['exec', 'stop', 'exec']);
    expect(p.events).toContainEqual(
      expect.objectContaining({
        type: 'census',
        outcome: 'ok',
        container: 'nova_libvirt',
        action: 'restart',
        operationId: 'heal-1',
        before: [U1],
        after: [U1],
      }),
    );
  });
});
