import { readdir, readFile } from 'node:fs/promises';
import type { VmProbe } from '../executor/ports.js';

/**
 * Finds VM processes the way libvirt leaves them: in a "machine" cgroup
 * outside any container's (/machine/qemu-N-NAME.libvirt-qemu, or
 * machine.slice on systemd hosts). Read from the host's /proc, so it needs no
 * exec into the hypervisor container and works while that container is down.
 */
export class ProcVmProbe implements VmProbe {
  constructor(private readonly procRoot = '/proc') {}

  async runningVms(): Promise<{ pid: number; name: string }[]> {
    const out: { pid: number; name: string }[] = [];
    let entries: string[];
    try {
      entries = await readdir(this.procRoot);
    } catch {
      return out;
    }
    for (const e of entries) {
      if (!/^[0-9]+$/.test(e)) continue;
      let cg: string;
      try {
        cg = await readFile(`${this.procRoot}/${e}/cgroup`, 'utf8');
      } catch {
        continue;
      }
      // A controller line placing it under /machine is enough: libvirt moves qemu only in the
      // hierarchies it manages, so name=systemd and the unified line still say /docker/<id>.
      const m = /:(?:\/machine\.slice\/|\/machine\/)([^/\n]+)/.exec(cg);
      if (!m) continue;
      const name = (m[1] ?? '').replace(/\.(libvirt-qemu|scope)$/, '');
      out.push({ pid: Number(e), name });
    }
    return out;
  }
}
