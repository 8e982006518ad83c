import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { ENGINE_CLI } from './docker.js';
import { waitFor } from './wait.js';

/**
 * The demo libvirt stand-in ("demo-service libvirt") and its stand-in VMs:
 * `vm-start NAME` in the container starts a process that moves itself into
 * /machine/spcd-demo-NAME in every cgroup v1 hierarchy, as libvirt does with
 * qemu, and prints its host PID.
 */
export interface StandInVm {
  readonly name: string;
  readonly pid: number;
}

/** The hypervisor stand-in's definition (the keys under its name), `indent` spaces deep. */
export function hypervisorBody(root: string, image: string, indent = 0): string {
  const pad = ' '.repeat(indent);
  return [
    `image: ${image}`,
    'command: [demo-service, libvirt]',
    'role: hypervisor',
    'privileged: false',
    'cap_add: [ALL]',
    'cap_drop: [SYS_RESOURCE]',
    'pid: host',
    'network: host',
    'cgroupns: host',
    'init: true',
    'binds:',
    '  - /sys/fs/cgroup:/sys/fs/cgroup',
    `  - ${root}/run-libvirt:/run/libvirt`,
    `  - ${root}/lib-libvirt:/var/lib/libvirt`,
    'tmpfs: [/sys/fs/cgroup/unified]',
    'stop_grace_period: 2s',
  ]
    .map((l) => pad + l)
    .join('\n');
}

export function startVm(container: string, name: string): StandInVm {
  const out = execFileSync(ENGINE_CLI, ['exec', container, 'vm-start', name], { encoding: 'utf8' });
  return { name, pid: Number(out.trim()) };
}

/** Kills the stand-in VMs and removes their cgroup directories (test cleanup). */
export async function endVms(vms: readonly StandInVm[]): Promise<void> {
  for (const vm of vms) {
    try {
      process.kill(vm.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const vm of vms) {
    await waitFor(`${vm.name} gone`, () => !existsSync(`/proc/${vm.pid}`), { timeoutMs: 5_000 }).catch(
      () => undefined,
    );
    for (const hier of readdirSync('/sys/fs/cgroup')) {
      const d = `/sys/fs/cgroup/${hier}/machine/spcd-demo-${vm.name}`;
      try {
        if (existsSync(d)) rmdirSync(d);
      } catch {
        // busy or not ours to remove: leave it
      }
    }
  }
}
