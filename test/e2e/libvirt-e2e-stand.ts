/**
 * The stand of the libvirt VM-continuity test (test/integration/libvirt-e2e.test.ts):
 * spcd, the libvirt container and a guest up before its steps; the summary
 * and the clean-up after.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { ProcVmProbe } from '../../agent/host/vm-probe.js';
import {
  buildImagesAndGuest,
  IMAGE_11,
  IMAGE_9,
  run,
  SpcdApi,
  startTime,
  vmsh,
} from './libvirt-e2e-harness.js';
import { TRACE_FILTERS, TRACE_LOG_IN } from './libvirt-phases.js';
import { cleanupInstance, ENGINE_CLI, ON_PODMAN } from '../support/docker.js';
import { sandbox } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';

import {
  writeLibvirtSet,
  e2e,
  NO_WARM,
  TRACE,
  results,
  STEPS,
  recordId,
  startSpcd,
} from './libvirt-e2e-run.js';

export async function leftovers(): Promise<{ qemu: boolean; containers: number; machineCgroups: number }> {
  const qemu = e2e.qemuPid > 0 && startTime(e2e.qemuPid) === e2e.qemuStart;
  const ps = await run(ENGINE_CLI, ['ps', '-aq', '--filter', `label=spcd-e2e.run=${e2e.runId}`], 60_000);
  const mine = await run(
    ENGINE_CLI,
    ['ps', '-aq', '--filter', `label=spcd.instance=${e2e.sb.instance}`],
    60_000,
  );
  let machineCgroups = 0;
  for (const h of readdirSync('/sys/fs/cgroup')) {
    const d = join('/sys/fs/cgroup', h, 'machine');
    if (!existsSync(d)) continue;
    machineCgroups += readdirSync(d).filter((n) => n.endsWith(`-${e2e.guest}.libvirt-qemu`)).length;
  }
  const containers = new Set(`${ps.stdout}\n${mine.stdout}`.split('\n').filter(Boolean)).size;
  return { qemu, containers, machineCgroups };
}

/** The stand: spcd, the libvirt container and a guest up before the file's tests; the summary and clean-up after. */
export function libvirtE2eStand(): void {
  beforeAll(async () => {
    e2e.build = await buildImagesAndGuest();
    console.log(
      `libvirt images ${e2e.build.imagesSeconds.toFixed(1)} s, guest ${e2e.build.guestSeconds.toFixed(1)} s (${JSON.stringify(e2e.build.sources)})\n${e2e.build.lines.join('\n')}`,
    );
    e2e.sb = sandbox('lve');
    e2e.runId = e2e.sb.instance;
    e2e.root = join(e2e.sb.root, 'lv');
    e2e.container = `${e2e.sb.instance}-libvirt`;
    e2e.guest = `e2e-${process.pid}-${Math.floor(Math.random() * 1e5)}`;
    await vmsh('prepare-root', [e2e.root]);
    for (const d of ['etc/libvirt/qemu', 'var/cache/libvirt'])
      mkdirSync(join(e2e.root, d), { recursive: true });
    writeLibvirtSet({
      noWarm: NO_WARM,
      ...(TRACE ? { trace: { file: TRACE_LOG_IN, filters: TRACE_FILTERS } } : {}),
    });
    await startSpcd();
    e2e.api = new SpcdApi(e2e.sb.socket);
    // The engine spcd found on the socket is the one this run is for (SPCD_ENGINE=podman: Podman).
    const status = await e2e.api.get<{ preflight: { checks: { name: string; detail: string }[] } }>(
      '/v1/status',
    );
    const engine = status.preflight.checks.find((c) => c.name === 'docker-engine')?.detail ?? '';
    console.log(`engine: ${engine}`);
    expect(engine).toMatch(ON_PODMAN ? /^Podman / : /^Docker /);
    const first = await waitFor(
      'the libvirt container running and its API answering (health)',
      async () => {
        const c = await e2e.api.container(e2e.container);
        return c.state === 'running' && c.health === 'healthy' && c;
      },
      { timeoutMs: 180_000, intervalMs: 250 },
    );
    recordId(first.containerId);
    expect(first.image).toBe(IMAGE_9);
    const g = await vmsh('start-guest', [e2e.root, e2e.container, e2e.guest], 180_000);
    e2e.qemuPid = Number(g.qemu_pid);
    e2e.qemuStart = g.qemu_start ?? '';
    expect(e2e.qemuPid).toBeGreaterThan(1);
    expect(startTime(e2e.qemuPid)).toBe(e2e.qemuStart);
    await vmsh('wait-counter', [e2e.root, e2e.guest, 3, 180], 200_000);
    e2e.watchPgid = Number((await vmsh('console-watch', [e2e.root, e2e.guest])).watch_pgid);
    await vmsh('api-probe', [e2e.root, IMAGE_11, e2e.runId]);
    // spcd's VM probe must see the real qemu (libvirt puts it under /machine/qemu-N-NAME.libvirt-qemu).
    const seen = await new ProcVmProbe().runningVms();
    expect(seen.find((v) => v.pid === e2e.qemuPid)?.name).toMatch(new RegExp(`^qemu-\\d+-${e2e.guest}$`));
  }, 30 * 60_000);

  afterAll(async () => {
    let left: Awaited<ReturnType<typeof leftovers>> | undefined;
    e2e.tap?.close();
    await e2e.spcd?.stop();
    if (e2e.watchPgid > 0) {
      try {
        process.kill(-e2e.watchPgid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    const trace = join(e2e.root, 'var/lib/libvirt/libvirtd-trace.log');
    if (TRACE && existsSync(trace)) {
      copyFileSync(trace, `/tmp/spcd-e2e-trace-${e2e.runId}.log`);
      console.log(`libvirtd trace: /tmp/spcd-e2e-trace-${e2e.runId}.log`);
    }
    if (process.env.SPCD_E2E_KEEP === '1') {
      console.log(
        `kept: root ${e2e.root}, guest ${e2e.guest}, containers labelled spcd-e2e.run=${e2e.runId}`,
      );
    } else if (e2e.sb) {
      const c = await vmsh('cleanup', [e2e.root, e2e.guest, e2e.runId, e2e.qemuPid || '']).catch(
        (e: Error) => ({
          error: e.message,
        }),
      );
      console.log(`cleanup ${JSON.stringify(c)}`);
      await cleanupInstance(e2e.sb.instance);
      rmSync(e2e.sb.root, { recursive: true, force: true });
      // Nothing of this run may stay behind: its qemu, its containers, its guest's cgroups.
      left = await leftovers();
      console.log(`leftovers ${JSON.stringify(left)}`);
    }
    const passed = results.filter((r) => r.ok).length;
    const apiWindows = results.map((r) => r.apiBackS).filter((x) => Number.isFinite(x));
    const maxApi = apiWindows.length ? Math.max(...apiWindows).toFixed(2) : 'nan';
    const summary = `vm_survived=${passed}/${STEPS} max_api_window_s=${maxApi} downgrade_refused=${e2e.downgradeRefused}`;
    console.log(summary);
    // One line per step (run-libvirt-e2e.sh aggregates them over runs), the summary last.
    const stepLines = results.map(
      (r) =>
        `step=${r.step} ok=${r.ok ? 1 : 0} api_back_s=${r.apiBackS.toFixed(3)} spcd_s=${r.spcdWindowS.toFixed(3)} load=${r.load.toFixed(1)}`,
    );
    if (process.env.SPCD_E2E_SUMMARY)
      writeFileSync(process.env.SPCD_E2E_SUMMARY, `${[...stepLines, summary].join('\n')}\n`);
    if (left) expect(left).toEqual({ qemu: false, containers: 0, machineCgroups: 0 });
  }, 180_000);
}
