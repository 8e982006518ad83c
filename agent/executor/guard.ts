import { SpcdError } from '../errors.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import {
  compareVersions,
  VERSION_LABEL,
  vmSafetyViolations,
  type HostCgroupFacts,
} from '../model/vm-safety.js';
import type { ImageEngine } from '../engine/types.js';
import type { ExecutorDeps } from './ports.js';

/**
 * Before a hypervisor container is stopped while VMs run: the definitions
 * (the one running and the one to run) must keep VMs alive, and the new
 * hypervisor must not be older than the running one (an older libvirt cannot
 * read the newer status XML and orphans the VMs). Returns warnings when
 * `force` overrides the downgrade rule; a broken definition is never forced.
 */
/** What the VM-safety checks need: the recorded specs, the VM probe, the image's labels, the bus. */
export type VmSafetyDeps = Pick<ExecutorDeps, 'vms' | 'events' | 'clock'> & {
  readonly state: {
    generation(name: string, generation: number): { readonly spec: ContainerSpec } | undefined;
  };
  readonly engine: Pick<ImageEngine, 'imageInfo'>;
};

export async function checkVmSafety(
  deps: VmSafetyDeps,
  next: ContainerSpec,
  old: ObservedContainer,
  nextImageLabels: Readonly<Record<string, string>>,
  force: boolean,
  host: HostCgroupFacts = { hybridWithControllers: false, unifiedOnly: false },
): Promise<string[]> {
  const oldSpec = deps.state.generation(old.identity.container, old.identity.generation)?.spec;
  const hypervisor = next.role === 'hypervisor' || oldSpec?.role === 'hypervisor';
  if (!hypervisor) return [];
  const vms = await deps.vms.runningVms();
  if (vms.length === 0) return [];
  const vmList = vms.map((v) => `${v.name}(pid ${v.pid})`).join(', ');
  const checks: [string, ContainerSpec | undefined][] = [
    ['running definition', oldSpec],
    ['new definition', next],
  ];
  for (const [which, spec] of checks) {
    if (!spec) continue;
    const broken = vmSafetyViolations(spec, host);
    if (broken.length > 0) {
      throw vmSafetyRefused(
        deps,
        'upgrade',
        `refusing to stop ${old.identity.container}: ${vms.length} VM(s) running and the ${which} breaks rule ${broken
          .map((b) => b.rule)
          .join(', ')}: ${broken[0]?.why}`,
        { container: old.identity.container, vms: vmList, rules: broken, definition: which },
      );
    }
  }
  const oldInfo = await deps.engine.imageInfo(old.imageId);
  const cmp = compareVersions(nextImageLabels[VERSION_LABEL], oldInfo?.labels[VERSION_LABEL]);
  if (cmp !== undefined && cmp < 0) {
    const cost = `the running VMs (${vmList}) keep running but become invisible to the older hypervisor ${nextImageLabels[VERSION_LABEL]} (it cannot read the status written by ${oldInfo?.labels[VERSION_LABEL]}); they must be restarted or migrated to be managed again`;
    if (!force) {
      throw vmSafetyRefused(
        deps,
        'upgrade',
        `refusing to downgrade hypervisor ${old.identity.container} from ${oldInfo?.labels[VERSION_LABEL]} to ${nextImageLabels[VERSION_LABEL]} while ${vms.length} VM(s) run: ${cost}. Use force to accept this.`,
        { container: old.identity.container, vms: vmList, rule: 'no-downgrade-with-vms', cost },
      );
    }
    return [`forced downgrade: ${cost}`];
  }
  return [];
}

/**
 * The VM_SAFETY_REFUSED error for a refusal, told on the bus first (the
 * refusals metric and alert count these, whoever asked: reconciler or operator).
 */
export function vmSafetyRefused(
  deps: Pick<ExecutorDeps, 'events' | 'clock'>,
  action: 'upgrade' | 'stop' | 'remove',
  message: string,
  details: Record<string, unknown> & { container: string },
): SpcdError {
  deps.events.publish({
    type: 'vm-safety-refused',
    at: deps.clock.now(),
    container: details.container,
    action,
    reason: message,
  });
  return new SpcdError('VM_SAFETY_REFUSED', message, details);
}

/**
 * Before a hypervisor is stopped while VMs run, whoever asked: the
 * operator's stop or restart, and a heal's restart of one that runs
 * (decision 0056; a heal's stop does not take it). The definition its
 * running generation was created from (else the desired one) must keep VMs
 * alive.
 */
export async function guardHypervisorStop(
  deps: Pick<ExecutorDeps, 'vms' | 'state' | 'events' | 'clock'>,
  spec: ContainerSpec,
  primary: ObservedContainer | undefined,
): Promise<void> {
  if (spec.role !== 'hypervisor') return;
  const vms = await deps.vms.runningVms();
  if (vms.length === 0) return;
  const name = spec.name;
  const running = primary ? deps.state.generation(name, primary.identity.generation)?.spec : undefined;
  const broken = vmSafetyViolations(running ?? spec, { hybridWithControllers: false, unifiedOnly: false });
  if (broken.length === 0) return;
  throw vmSafetyRefused(
    deps,
    'stop',
    `refusing to stop ${name}: ${vms.length} VM(s) running and its definition breaks ${broken.map((b) => b.rule).join(', ')}: ${broken[0]?.why}`,
    { container: name, rules: broken },
  );
}
