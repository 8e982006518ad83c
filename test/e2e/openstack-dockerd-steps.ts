/**
 * The engine-restart steps of the OpenStack end-to-end test
 * (docs/explanation/openstack-proof.md, "A restart of the Docker engine"): dockerd stops
 * and starts again under everything, as an operator's `apt upgrade` of
 * docker.io restarts docker.service. With live-restore on the containers
 * keep running through it and spcd must touch nothing; with live-restore off
 * dockerd stops every container on its way down, and spcd must bring each
 * back. Either way the VMs keep running (their qemu is not in any
 * container's cgroup) and every ping packet is counted by the caller.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';
import type { SpcdControl } from './openstack-actions.js';
import type { Settle } from './openstack-control-steps.js';
import { instances } from './openstack-outage-steps.js';
import type { Acted } from './openstack-steps.js';

const DAEMON_JSON = '/etc/docker/daemon.json';

const docker = (args: string[]): string =>
  execFileSync('/usr/bin/docker', args, { encoding: 'utf8', timeout: 60_000 }).trim();

function dockerdPid(): number {
  return Number(execFileSync('pgrep', ['-xo', 'dockerd'], { encoding: 'utf8' }).trim());
}

const liveRestoreEnabled = (): boolean => docker(['info', '-f', '{{.LiveRestoreEnabled}}']) === 'true';

/**
 * The engine's configuration as the step found it, and a way to put it
 * back: the file's text (or its absence) and the running dockerd's
 * live-restore.
 */
export class DaemonConfig {
  private readonly before: string | undefined = existsSync(DAEMON_JSON)
    ? readFileSync(DAEMON_JSON, 'utf8')
    : undefined;
  /** The running dockerd's live-restore before the first change (undefined: nothing changed yet). */
  private liveBefore: boolean | undefined;

  /** Writes live-restore into the engine's configuration and has the running dockerd reload it (SIGHUP). */
  async liveRestore(on: boolean): Promise<void> {
    this.liveBefore ??= liveRestoreEnabled();
    const base = this.before ? (JSON.parse(this.before) as Record<string, unknown>) : {};
    writeFileSync(DAEMON_JSON, `${JSON.stringify({ ...base, 'live-restore': on }, null, 2)}\n`);
    process.kill(dockerdPid(), 'SIGHUP');
    await waitFor(`dockerd to reload with live-restore ${on}`, () => liveRestoreEnabled() === on, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
  }

  /**
   * The running dockerd's live-restore as it was (a reload without the file
   * keeps the last value), then the file as it was.
   */
  async restore(): Promise<void> {
    try {
      if (this.liveBefore !== undefined) await this.liveRestore(this.liveBefore);
    } finally {
      if (this.before === undefined) rmSync(DAEMON_JSON, { force: true });
      else writeFileSync(DAEMON_JSON, this.before);
    }
  }
}

export interface DockerdResult extends Acted {
  /** live-restore as the engine had it when it was stopped. */
  readonly liveRestore: boolean;
  /** Containers whose engine id or start time changed through the restart. */
  readonly restarted: readonly string[];
  /** Containers spcd showed running before the restart. */
  readonly running: number;
  /** Containers spcd showed running before that it does not show running after. */
  readonly notBack: readonly string[];
  /** spcd's operations that began from the stop to the end of the step (kind, container). */
  readonly operations: readonly string[];
}

/** Stops dockerd as `systemctl restart docker` does (SIGTERM), and starts it again with the project's script. */
async function bounceDockerd(): Promise<{ downS: number; upSince: number }> {
  const pid = dockerdPid();
  const t = Date.now();
  process.kill(pid, 'SIGTERM');
  await waitFor('dockerd to exit', () => !existsSync(`/proc/${pid}`), {
    timeoutMs: 120_000,
    intervalMs: 200,
  });
  const downS = (Date.now() - t) / 1000;
  execFileSync('bash', [join(REPO, 'scripts/ensure-docker.sh')], { stdio: 'ignore', timeout: 120_000 });
  return { downS, upSince: Date.now() };
}

/**
 * Restarts dockerd under everything, then waits until spcd shows every
 * container it showed before running again. `probe`: the test's own libvirt
 * API probe container (not spcd's), started again when dockerd stopped it.
 * `settle`: what the restarted services' clients need beyond "running"
 * (Neutron's network list after a start of neutron-server, as in step 8),
 * retried until it answers; only when a container started again.
 */
export async function dockerdRestart(
  c: SpcdControl,
  probe: string,
  settle?: Settle,
  timeoutMs = 900_000,
): Promise<DockerdResult> {
  const before = new Map([...(await instances(c))].filter(([, v]) => v.running));
  const liveRestore = liveRestoreEnabled();
  const stopAt = Date.now();
  const { downS, upSince } = await bounceDockerd();
  if (docker(['inspect', '-f', '{{.State.Running}}', probe]) !== 'true') docker(['start', probe]);
  await c
    .tap()
    .wait(
      'spcd to see the engine again',
      (e) => e.type === 'engine' && e.available === true && e.at >= stopAt,
      120_000,
    );
  await waitFor(
    'spcd to show every container running again',
    async () => {
      const now = await instances(c);
      return [...before.keys()].every((n) => now.get(n)?.running);
    },
    { timeoutMs, intervalMs: 2000 },
  );
  const after = await instances(c);
  const restarted = [...before].filter(([n, v]) => after.get(n)?.at !== v.at).map(([n]) => n);
  let settled = '';
  if (settle && restarted.length > 0) {
    await waitFor(settle.what, () => settle.probe().then(() => true), { timeoutMs, intervalMs: 1000 });
    settled = ` up_to_${settle.what.replace(/\W+/g, '_')}_s=${((Date.now() - upSince) / 1000).toFixed(1)}`;
  }
  const notBack = [...before.keys()].filter((n) => !after.get(n)?.running);
  const ops = new Map<string, string>();
  for (const e of c.tap().events)
    if (e.type === 'operation' && e.at >= stopAt && e.operationId)
      ops.set(e.operationId, `${e.kind}:${e.target}`);
  const operations = [...ops.values()];
  return {
    // The window of nova-compute's `up` counts from the engine's return: before it nothing of spcd's can run.
    stopAt: upSince,
    upSince,
    libvirtStopped: false,
    liveRestore,
    running: before.size,
    restarted,
    notBack,
    operations,
    spcd: `live_restore=${liveRestore} dockerd_stop_s=${downS.toFixed(1)} engine_down_s=${((upSince - stopAt) / 1000).toFixed(1)} all_running_after_s=${((Date.now() - upSince) / 1000).toFixed(1)} restarted=${restarted.length}/${before.size} operations=${operations.length}${settled}`,
  };
}
