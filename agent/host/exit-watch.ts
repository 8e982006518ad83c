import { readFile } from 'node:fs/promises';
import type { Clock } from '../model/clock.js';
import type { ExitWatch } from '../executor/ports.js';

/** How often the container's cgroup is read while it stops. */
export const EXIT_POLL_MS = 10;

/**
 * Sees, from the host, the moment a stopping container has no process left,
 * which is earlier than the engine's "stopped": after the last process exits,
 * the engine still reaps it, runs runc's kill of the cgroup, unmounts and
 * records the exit (0.1-0.6 s on a loaded 2-core host, docs/performance.md#libvirt-end-to-end).
 *
 * "No process left" is read the way runc itself finds a container's
 * processes for its kill: the container's cgroup in the v1 `devices`
 * hierarchy, or its cgroup v2 group when there is no v1 devices hierarchy.
 * It is empty (or gone) when every process runc would kill has exited;
 * a zombie counts as exited. A VM that libvirt moved out to /machine is not
 * in it. When the host's /proc or cgroup tree cannot show the container (spcd
 * in its own pid or cgroup namespace, a cgroup path that does not name the
 * container) track() says so and the caller waits for the engine, as before.
 */
export class CgroupExitWatch implements ExitWatch {
  constructor(
    private readonly clock: Clock,
    private readonly procRoot = '/proc',
    private readonly cgroupRoot = '/sys/fs/cgroup',
  ) {}

  async track(
    containerId: string,
    pid: number,
  ): Promise<{ gone(signal: AbortSignal): Promise<boolean> } | undefined> {
    if (!(pid > 0) || containerId.length < 12) return undefined;
    const procs = await this.procsFile(pid, containerId);
    if (!procs) return undefined;
    return { gone: (signal) => this.waitEmpty(procs, signal) };
  }

  /** The cgroup.procs file runc reads for this container, when it is visible and names the container. */
  private async procsFile(pid: number, containerId: string): Promise<string | undefined> {
    let text: string;
    try {
      text = await readFile(`${this.procRoot}/${pid}/cgroup`, 'utf8');
    } catch {
      return undefined;
    }
    const lines = text.split('\n').filter(Boolean);
    const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes('devices'));
    const v2 = lines.find((l) => l.startsWith('0::'));
    const path = v1 ? `devices${v1.slice(v1.indexOf(':', v1.indexOf(':') + 1) + 1)}` : v2?.slice(3);
    if (path === undefined || !path.includes(containerId)) return undefined;
    const file = `${this.cgroupRoot}/${path.replace(/^\/+/, '')}/cgroup.procs`;
    // The file must be readable now and list the process, or this is not the host's view of it.
    const now = await this.pids(file);
    return now?.includes(pid) ? file : undefined;
  }

  private async pids(file: string): Promise<number[] | undefined> {
    try {
      return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map(Number);
    } catch (err) {
      // The engine removed the cgroup: nothing is left in it.
      return (err as NodeJS.ErrnoException).code === 'ENOENT' ? [] : undefined;
    }
  }

  private async alive(pid: number): Promise<boolean> {
    try {
      const stat = await readFile(`${this.procRoot}/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false;
    }
  }

  /** true once no live process is left in the cgroup; false when aborted or unreadable. */
  private async waitEmpty(file: string, signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      const pids = await this.pids(file);
      if (pids === undefined) return false;
      let live = false;
      for (const p of pids) if (await this.alive(p)) live = true;
      if (!live) return true;
      if (signal.aborted) break;
      await new Promise<void>((resolve) => {
        const onAbort = (): void => (cancel(), resolve());
        const cancel = this.clock.setTimer(EXIT_POLL_MS, () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        });
        signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    return false;
  }
}
