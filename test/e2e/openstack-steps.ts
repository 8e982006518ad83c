/**
 * One step of the OpenStack end-to-end test (test/integration/openstack-e2e.test.ts):
 * a change made through spcd's API, then the checks on both Nova VMs and the
 * windows: stop -> the libvirt API answers (a separate probe container),
 * stop -> nova-compute is `up` and enabled again with a heartbeat after the
 * stop (Nova's os-services), and spcd's own figures.
 */
import { join } from 'node:path';
import { waitFor } from '../support/wait.js';
import type { EventTap, SpcdApi } from './libvirt-e2e-harness.js';
import { vmsh } from './libvirt-e2e-harness.js';
import { ConsoleWatch, qemuOf, type QemuProcess } from './openstack-e2e-harness.js';
import { novaTime, type OpenStack } from './openstack-client.js';

export interface Vm {
  readonly id: string;
  readonly domain: string;
  readonly qemu: QemuProcess;
  readonly console: ConsoleWatch;
}

export interface Acted {
  /** Epoch ms: spcd began to stop the container (its stop-old event, or the restart's stoppedAt). */
  readonly stopAt: number;
  /** spcd's own figures, printed as they are. */
  readonly spcd: string;
  /** The libvirt container was stopped in this step (its API window counts). */
  readonly libvirtStopped: boolean;
  /** nova-compute must show a heartbeat after this (epoch ms; default stopAt): a set upgrade's last stop. */
  readonly upSince?: number;
}

export interface StepResult {
  readonly step: string;
  vmsOk: number;
  libvirtBackS: number;
  computeUpS: number;
  /** A nova-compute started in this step: its own start -> up (NaN when none started). */
  computeStartToUpS: number;
  computeEnabledS: number;
  spcd: string;
  censusMismatches: number;
  failures: string[];
}

export interface StepContext {
  readonly os: OpenStack;
  readonly api: SpcdApi;
  readonly tap: () => EventTap;
  readonly libvirtRoot: string;
  readonly libvirt: string;
  /** The nova_compute container's name (a new start's own start -> up is measured). */
  readonly compute: string;
  readonly vms: readonly Vm[];
  readonly deadlineMs: number;
}

interface ServiceSeen {
  readonly at: number;
  readonly heartbeat: number;
  readonly up: boolean;
  readonly enabled: boolean;
}

/**
 * Polls Nova's nova-compute service once a second from before a step's
 * action, so that "stop -> up" does not wait for the action's own end.
 */
class ServicePoller {
  readonly seen: ServiceSeen[] = [];
  private stopped = false;
  private done: Promise<void>;

  constructor(private readonly os: OpenStack) {
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const t = Date.now();
      const svc = await this.os.computeServices().then(
        (x) => x[0],
        () => undefined,
      );
      if (svc)
        this.seen.push({
          at: Date.now(),
          heartbeat: novaTime(svc.updated_at),
          up: svc.state === 'up',
          enabled: svc.status === 'enabled',
        });
      await new Promise((res) => setTimeout(res, Math.max(0, 1000 - (Date.now() - t))));
    }
  }

  /** The first time Nova showed a heartbeat after `sinceMs` with the service up (and enabled). */
  first(sinceMs: number, enabled: boolean): number | undefined {
    return this.seen.find((x) => x.heartbeat > sinceMs && x.up && (!enabled || x.enabled))?.at;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

/** Nova's nova-compute service is up and enabled, with a heartbeat after `sinceMs`. */
export async function computeUpSince(os: OpenStack, sinceMs: number): Promise<boolean> {
  const svc = (await os.computeServices())[0];
  return !!svc && svc.state === 'up' && svc.status === 'enabled' && novaTime(svc.updated_at) > sinceMs;
}

/**
 * When the step started a new nova-compute (its container started after the
 * step's stop): the time from that start to the first `up` with a heartbeat,
 * nova-compute's own part of the window. NaN otherwise.
 */
async function startToUp(ctx: StepContext, stopAt: number, poller: ServicePoller): Promise<number> {
  const c = await ctx.api.container(ctx.compute).catch(() => undefined);
  const started = c?.startedAt ? Date.parse(c.startedAt) : Number.NaN;
  if (!(started >= stopAt)) return Number.NaN;
  // A heartbeat after the new start: the stopping nova-compute may still report one after the stop.
  const upAt = poller.first(started, false);
  return upAt === undefined ? Number.NaN : (upAt - started) / 1000;
}

/** Runs one step and checks every VM through it. */
export async function runStep(
  ctx: StepContext,
  step: string,
  act: () => Promise<Acted>,
): Promise<StepResult> {
  const r: StepResult = {
    step,
    vmsOk: 0,
    libvirtBackS: Number.NaN,
    computeUpS: Number.NaN,
    computeStartToUpS: Number.NaN,
    computeEnabledS: Number.NaN,
    spcd: '',
    censusMismatches: 0,
    failures: [],
  };
  const t0 = Date.now();
  try {
    for (const vm of ctx.vms) {
      const c = vm.console.last();
      await waitFor(`${vm.domain}'s console to advance`, () => vm.console.last() >= c + 2, {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
    }
    const poller = new ServicePoller(ctx.os);
    let a: Acted;
    try {
      a = await act();
      r.spcd = a.spcd;
      // stop -> nova-compute up (a heartbeat after the stop) and enabled again
      // (nova-compute disables itself while its libvirt connection is lost).
      await waitFor(
        'nova-compute up and enabled with a heartbeat after the stop',
        () => poller.first(a.upSince ?? a.stopAt, true),
        {
          timeoutMs: ctx.deadlineMs,
          intervalMs: 500,
        },
      ).catch((e: Error) => r.failures.push(e.message));
    } finally {
      await poller.stop();
    }
    const since = a.upSince ?? a.stopAt;
    r.computeUpS = ((poller.first(since, false) ?? Number.NaN) - a.stopAt) / 1000;
    r.computeEnabledS = ((poller.first(since, true) ?? Number.NaN) - a.stopAt) / 1000;
    r.computeStartToUpS = await startToUp(ctx, a.stopAt, poller);
    if (a.libvirtStopped) {
      const w = await waitFor(
        'the libvirt API probe to see the API back',
        () => vmsh('api-window', [ctx.libvirtRoot, (a.stopAt / 1000).toFixed(6)]),
        { timeoutMs: 120_000, intervalMs: 500 },
      ).catch((e: Error) => {
        r.failures.push(e.message);
        return { api_back_s: 'nan' };
      });
      r.libvirtBackS = Number(w.api_back_s);
    }
    const lv = await ctx.api.container(ctx.libvirt);
    const census = lv.census as { mismatches?: number; outcome?: string } | undefined;
    r.censusMismatches = Number(census?.mismatches ?? 0);
    if (lv.lastError?.code === 'DOMAIN_CENSUS_MISMATCH') r.censusMismatches++;
    for (const vm of ctx.vms) {
      const fails: string[] = [];
      const c = vm.console.last();
      await waitFor(`${vm.domain}'s console after the step`, () => vm.console.last() >= c + 3, {
        timeoutMs: 90_000,
        intervalMs: 200,
      }).catch((e: Error) => fails.push(e.message));
      const cont = vm.console.continuity(t0 - 1500);
      if (cont.missing !== 0)
        fails.push(`console counter: ${cont.missing} values missing (${cont.from}..${cont.to})`);
      const q = qemuOf(ctx.libvirtRoot, vm.domain);
      if (!q || q.pid !== vm.qemu.pid || q.start !== vm.qemu.start)
        fails.push(`qemu of ${vm.domain}: ${JSON.stringify(q)}, was ${JSON.stringify(vm.qemu)}`);
      const s = await waitFor(
        `Nova to show ${vm.id} ACTIVE and running`,
        async () => {
          const x = await ctx.os.server(vm.id);
          return (
            x?.status === 'ACTIVE' && x['OS-EXT-STS:power_state'] === 1 && !x['OS-EXT-STS:task_state'] && x
          );
        },
        { timeoutMs: 120_000, intervalMs: 1000 },
      ).catch((e: Error) => {
        fails.push(e.message);
        return undefined;
      });
      console.log(
        `  vm=${vm.domain} qemu_pid=${q?.pid ?? 'none'} same=${q?.pid === vm.qemu.pid && q?.start === vm.qemu.start ? 1 : 0} ` +
          `counter=${cont.from}..${cont.to} missing=${cont.missing} max_console_gap_s=${cont.maxGapS.toFixed(2)} nova=${s ? `${s.status}/${s['OS-EXT-STS:power_state']}` : 'not-active'}`,
      );
      if (fails.length === 0) r.vmsOk++;
      r.failures.push(...fails);
    }
    if (r.censusMismatches > 0) r.failures.push(`domain census: ${JSON.stringify(lv.census)}`);
  } catch (err) {
    r.failures.push((err as Error).message);
  }
  console.log(
    `step=${step} vms_ok=${r.vmsOk}/${ctx.vms.length} stop_to_libvirt_api_s=${Number.isFinite(r.libvirtBackS) ? r.libvirtBackS.toFixed(2) : 'n/a'} ` +
      `stop_to_compute_up_s=${r.computeUpS.toFixed(1)} start_to_compute_up_s=${Number.isFinite(r.computeStartToUpS) ? r.computeStartToUpS.toFixed(1) : 'n/a'} stop_to_compute_enabled_s=${r.computeEnabledS.toFixed(1)} census_mismatches=${r.censusMismatches} spcd: ${r.spcd}` +
      (r.failures.length ? ` failures=${JSON.stringify(r.failures)}` : ''),
  );
  return r;
}

/** The console.log Nova gives a server's serial port, under the instances folder. */
export function consoleLog(instancesRoot: string, serverId: string): string {
  return join(instancesRoot, serverId, 'console.log');
}

/** The qemu of a freshly booted server, once libvirt wrote its pid file. */
export async function waitQemu(libvirtRoot: string, domain: string): Promise<QemuProcess> {
  return waitFor(`qemu of ${domain}`, () => qemuOf(libvirtRoot, domain), {
    timeoutMs: 60_000,
    intervalMs: 500,
  });
}

/**
 * Nova still manages the variant's VMs after everything spcd did under
 * them: it stops the first (its qemu gone) and starts it again (a new qemu,
 * its counter from 0 in a new console.log), and deletes the second (its
 * qemu gone).
 */
export async function novaManages(os: OpenStack, libvirtRoot: string, vms: readonly Vm[]): Promise<void> {
  const [a, b] = vms as [Vm, Vm];
  const status = (id: string, want: string, what: string): Promise<unknown> =>
    waitFor(what, async () => (await os.server(id))?.status === want, {
      timeoutMs: 300_000,
      intervalMs: 1000,
    });
  await os.action(a.id, 'os-stop');
  await status(a.id, 'SHUTOFF', 'VM 1 SHUTOFF');
  if (qemuOf(libvirtRoot, a.domain)) throw new Error(`${a.domain}'s qemu still runs after Nova stopped it`);
  await os.action(a.id, 'os-start');
  await status(a.id, 'ACTIVE', 'VM 1 ACTIVE again');
  const q = await waitQemu(libvirtRoot, a.domain);
  if (q.pid === a.qemu.pid) throw new Error(`${a.domain} started with its old qemu ${q.pid}`);
  const fresh = new ConsoleWatch(a.console.file);
  await waitFor('VM 1 counting again', () => fresh.ticks.some((t) => t.n >= 2), {
    timeoutMs: 300_000,
    intervalMs: 500,
  }).finally(() => fresh.stop());
  await os.deleteServer(b.id);
  await waitFor('VM 2 gone from Nova', async () => (await os.server(b.id)) === undefined, {
    timeoutMs: 300_000,
    intervalMs: 1000,
  });
  await waitFor('VM 2 qemu gone', () => qemuOf(libvirtRoot, b.domain) === undefined, {
    timeoutMs: 60_000,
    intervalMs: 500,
  });
}
