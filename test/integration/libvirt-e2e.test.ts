/**
 * VM continuity on a real libvirt and a real qemu guest, driven through
 * spcd's API (issue #8, docs/explanation/libvirt-proof.md). spcd runs the real-VM set
 * (container-sets-e2e/libvirt.yaml) with libvirt 9; the test starts a TCG
 * guest with virsh in that container, then through the API:
 *   1. upgrades libvirt 9 -> 11;
 *   2. restarts the container;
 *   3. upgrades to the same image again (a new generation);
 *   4. kills spcd with SIGKILL in the middle of an upgrade (right after the
 *      old libvirt was stopped) and starts it again: recovery undoes it.
 * After each: same qemu PID and start time, no console counter missing and no
 * console gap longer than spcd's window plus one tick, `virsh domstate`
 * running in the current container, suspend/resume through the new daemon.
 * Then the guard: a rollback to libvirt 9 is refused (VM_SAFETY_REFUSED), and
 * a definition without the /sys/fs/cgroup bind, loaded by SIGHUP, is refused
 * with the hypervisor left running (same container, same PID).
 *
 * SPCD_E2E_SUMMARY=FILE: the summary line is written there (npm run e2e:libvirt).
 */
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcVmProbe } from '../../agent/host/vm-probe.js';
import {
  buildImagesAndGuest,
  EventTap,
  IMAGE_11,
  IMAGE_9,
  renderSet,
  run,
  SpcdApi,
  startTime,
  vmsh,
  type BuildCost,
} from '../e2e/libvirt-e2e-harness.js';
import {
  enginePhases,
  formatPhases,
  libvirtdPhases,
  spcdPhases,
  TRACE_FILTERS,
  TRACE_LOG_IN,
  type Phases,
} from '../e2e/libvirt-phases.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';

/** The guest prints one counter line per second. */
const TICK_S = 1.0;
/**
 * Host-side slack on top of one tick: the console watcher polls the file every
 * 0.1 s (stamps late by up to that, at either end of a gap) and a TCG guest's
 * timer slips under load (phase 1 saw gaps of up to 1.59 s with no outage at
 * all at load ~14).
 */
const SLACK_S = 0.6;
const SPCD_ARGS = ['--gate-deadline', '90s', '--relist-interval', '2s'];
/** SPCD_E2E_NO_WARM=1: without the bootstrap task that warms qemu's capabilities cache (to measure what it saves). */
const NO_WARM = process.env.SPCD_E2E_NO_WARM === '1';
/** SPCD_E2E_TRACE=1: libvirtd logs its start-up and shutdown with timestamps, for the phase timelines (libvirt-phases.ts). */
const TRACE = process.env.SPCD_E2E_TRACE === '1';

interface StepResult {
  step: string;
  ok: boolean;
  spcdWindow: string;
  spcdWindowS: number;
  apiBackS: number;
  consoleMaxGapS: number;
  allowedGapS: number;
  counterMissing: number;
  qemuPid: number;
  qemuStartSame: boolean;
  domstate: string;
  suspendResume: string;
  persistent: string;
  /** Where the window went: spcd's steps, the engine's events, libvirtd's log (epoch seconds). */
  phases: Phases;
  /** The host's 1-minute load average when the step began. */
  load: number;
  failures: string[];
}

const results: StepResult[] = [];
const STEPS = 4;
let downgradeRefused = 0;
let build: BuildCost | undefined;
let sb: Sandbox;
let root = '';
let container = '';
let guest = '';
let runId = '';
let spcd: SpcdProcess | undefined;
let tap: EventTap | undefined;
let api: SpcdApi;
let qemuPid = 0;
let qemuStart = '';
let watchPgid = 0;

function recordId(id: string | null | undefined): void {
  if (id) appendFileSync(join(root, 'probe', 'containers'), `${id}\n`);
}

async function startSpcd(env: NodeJS.ProcessEnv = {}): Promise<void> {
  const p = SpcdProcess.start(sb, SPCD_ARGS, env);
  spcd = p;
  await p.readyOrExit(120_000);
  tap = await EventTap.open(sb.socket);
}

async function counterNow(): Promise<number> {
  return Number((await vmsh('wait-counter', [root, guest, 0, 30])).counter);
}

async function virsh(...args: string[]): Promise<string> {
  const r = await run(
    '/usr/bin/docker',
    ['exec', container, 'virsh', '-q', '-c', 'qemu:///system', ...args],
    60_000,
  );
  return r.stdout.trim();
}

interface Acted {
  /** Epoch seconds of the stop of the running libvirt container. */
  tStop: number;
  /** The window spcd reported (seconds) and what it covers. */
  spcdWindowS: number;
  spcdWindow: string;
  /** The containers stopped and started (the same id for a restart), for the engine's events. */
  ids?: { old: string; new: string };
  operationId?: string;
}

/** The step's timeline: spcd's step events, the engine's events, libvirtd's trace, the probe's API back. */
async function phasesOf(a: Acted, apiBackS: number): Promise<Phases> {
  const until = Date.now() / 1000;
  const p: Phases = {
    ...(a.operationId ? spcdPhases(tap?.events ?? [], a.operationId) : {}),
    ...(a.ids ? await enginePhases(runId, a.ids, a.tStop - 1, until) : {}),
    ...libvirtdPhases(join(root, 'var/lib/libvirt/libvirtd-trace.log'), a.tStop),
  };
  if (Number.isFinite(apiBackS)) p.probe_api_back = a.tStop + apiBackS;
  p.stop_call = a.tStop;
  return p;
}

/** Runs one transition and checks the guest through it; records the result. */
async function survive(step: string, act: () => Promise<Acted>): Promise<StepResult> {
  const r: StepResult = {
    step,
    ok: false,
    spcdWindow: '',
    spcdWindowS: Number.NaN,
    apiBackS: Number.NaN,
    consoleMaxGapS: Number.NaN,
    allowedGapS: Number.NaN,
    counterMissing: -1,
    qemuPid: 0,
    qemuStartSame: false,
    domstate: '',
    suspendResume: 'skipped',
    persistent: '',
    phases: {},
    load: loadavg()[0] ?? Number.NaN,
    failures: [],
  };
  results.push(r);
  try {
    // A couple of console lines stamped before the outage.
    const c0 = await counterNow();
    await vmsh('wait-counter', [root, guest, c0 + 2, 60]);
    const a = await act();
    r.spcdWindowS = a.spcdWindowS;
    r.spcdWindow = a.spcdWindow;
    const apiWin = await waitFor(
      'the libvirt API probe to see the API back',
      () => vmsh('api-window', [root, a.tStop.toFixed(6)]),
      { timeoutMs: 120_000, intervalMs: 200 },
    );
    r.apiBackS = Number(apiWin.api_back_s);
    r.phases = await phasesOf(a, r.apiBackS).catch((e: Error) => {
      console.log(`phases of ${step}: ${e.message}`);
      return {};
    });
    console.log(formatPhases(step, a.tStop, r.phases));
    // Three more console lines after the API is back, then the gap over the whole outage.
    const c1 = await counterNow();
    await vmsh('wait-counter', [root, guest, c1 + 3, 60]);
    const cg = await vmsh('console-gap', [
      root,
      guest,
      (a.tStop - 2).toFixed(6),
      (Date.now() / 1000).toFixed(6),
    ]);
    r.consoleMaxGapS = Number(cg.console_max_gap_s);
    r.counterMissing = Number(cg.counter_missing);
    r.allowedGapS = a.spcdWindowS + TICK_S + SLACK_S;
    const q = await vmsh('qemu-pid', [root, guest, qemuPid]);
    r.qemuPid = Number(q.qemu_pid);
    r.qemuStartSame = q.qemu_start === qemuStart && startTime(qemuPid) === qemuStart;
    if (r.qemuPid !== qemuPid) r.failures.push(`qemu pid ${r.qemuPid} != ${qemuPid}`);
    if (!r.qemuStartSame) r.failures.push(`qemu start time ${q.qemu_start} != ${qemuStart}`);
    if (q.qemu_alive !== '1') r.failures.push('qemu not alive');
    if (r.counterMissing !== 0) r.failures.push(`${r.counterMissing} console counter value(s) missing`);
    if (!(r.consoleMaxGapS <= r.allowedGapS))
      r.failures.push(`console gap ${r.consoleMaxGapS} s > allowed ${r.allowedGapS.toFixed(2)} s`);
    r.domstate = (await vmsh('domstate', [container, guest])).domstate ?? '';
    if (r.domstate !== 'running') r.failures.push(`domstate ${r.domstate} in the current container`);
    else {
      r.suspendResume = await vmsh('suspend-resume', [container, guest]).then(
        (x) => x.suspend_resume ?? 'failed',
        () => 'failed',
      );
      if (r.suspendResume !== 'ok') r.failures.push('suspend/resume through the new daemon failed');
    }
    r.persistent = /^Persistent:\s+(\S+)/m.exec(await virsh('dominfo', guest))?.[1] ?? '';
    if (r.persistent !== 'yes') r.failures.push(`domain persistent=${r.persistent}`);
  } catch (err) {
    r.failures.push((err as Error).message);
  }
  r.ok = r.failures.length === 0;
  console.log(
    `step=${step} ok=${r.ok ? 1 : 0} spcd_window=${r.spcdWindow}:${r.spcdWindowS.toFixed(2)}s api_back_s=${r.apiBackS.toFixed(2)} ` +
      `console_max_gap_s=${r.consoleMaxGapS.toFixed(2)} allowed_gap_s=${r.allowedGapS.toFixed(2)} counter_missing=${r.counterMissing} ` +
      `qemu_pid=${r.qemuPid} start_same=${r.qemuStartSame ? 1 : 0} domstate=${r.domstate} suspend_resume=${r.suspendResume} persistent=${r.persistent}` +
      (r.failures.length ? ` failures=${JSON.stringify(r.failures)}` : ''),
  );
  return r;
}

/** An upgrade through the API; its window is spcd's stop -> health gate passed (= `virsh version --daemon` answers). */
async function upgradeVia(image: string): Promise<Acted> {
  const before = await api.container(container);
  const op = await api.post(`/v1/containers/${container}/upgrade`, {
    image,
    expectedGeneration: before.generation,
  });
  const fin = await tap!.finished(op, 240_000);
  if (fin.phase !== 'succeeded') throw new Error(`upgrade failed: ${JSON.stringify(fin.error)}`);
  const stop = tap!.find(
    (e) =>
      e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
  );
  if (!stop) throw new Error('no stop-old step event');
  const w = fin.result?.window as { stopToRunningMs: number; stopToHealthyMs: number };
  const after = await api.container(container);
  recordId(after.containerId);
  await expectCensusOk(op, 'upgrade');
  expect(after.generation).toBe(before.generation + 1);
  expect(after.image).toBe(image);
  expect(after.containerId).not.toBe(before.containerId);
  const warm = ['begin', 'done'].map(
    (o) =>
      tap!.find(
        (e) =>
          e.type === 'upgrade-step' &&
          e.operationId === op &&
          e.step === 'bootstrap:warm-qemu-caps' &&
          e.outcome === o,
      )?.at,
  );
  const warmS = warm[0] && warm[1] ? ((warm[1] - warm[0]) / 1000).toFixed(2) : 'none';
  // Which qemu capabilities the new libvirt had to probe itself: cache files written after the stop.
  const capsDir = join(root, 'var/cache/libvirt/qemu/capabilities');
  const reprobed = existsSync(capsDir)
    ? readdirSync(capsDir).filter((f) => statSync(join(capsDir, f)).mtimeMs > stop.at).length
    : 0;
  console.log(
    `upgrade ${before.image} -> ${image}: generation ${after.generation} warm_task_s=${warmS} caps_probed_in_window=${reprobed} stop_to_running_s=${(w.stopToRunningMs / 1000).toFixed(2)} stop_to_healthy_s=${(w.stopToHealthyMs / 1000).toFixed(2)}`,
  );
  return {
    tStop: stop.at / 1000,
    spcdWindowS: w.stopToHealthyMs / 1000,
    spcdWindow: 'stopToHealthy',
    ids: { old: before.containerId!, new: after.containerId! },
    operationId: op,
  };
}

/**
 * The domain census of an operation (issue 12): spcd listed the guest's UUID
 * before the stop and again after, and says so in the event and the status.
 */
async function expectCensusOk(op: string, action: string): Promise<void> {
  const e = tap!.find((x) => x.type === 'census' && x.operationId === op);
  expect(e, `no census event for ${op}`).toBeDefined();
  const uuid = await virsh('domuuid', guest);
  expect(e).toMatchObject({ outcome: 'ok', action, before: [uuid], after: [uuid], missing: [], added: [] });
  const c = await api.container(container);
  expect(c.census).toMatchObject({
    outcome: 'ok',
    action,
    operationId: op,
    before: 1,
    after: 1,
    mismatches: 0,
  });
  expect(c.lastError?.code).not.toBe('DOMAIN_CENSUS_MISMATCH');
  console.log(`census ${action}: ${e!.detail}`);
}

beforeAll(async () => {
  build = await buildImagesAndGuest();
  console.log(
    `libvirt images ${build.imagesSeconds.toFixed(1)} s, guest ${build.guestSeconds.toFixed(1)} s (${JSON.stringify(build.sources)})\n${build.lines.join('\n')}`,
  );
  sb = sandbox('lve');
  runId = sb.instance;
  root = join(sb.root, 'lv');
  container = `${sb.instance}-libvirt`;
  guest = `e2e-${process.pid}-${Math.floor(Math.random() * 1e5)}`;
  await vmsh('prepare-root', [root]);
  for (const d of ['etc/libvirt/qemu', 'var/cache/libvirt']) mkdirSync(join(root, d), { recursive: true });
  writeSet(
    sb,
    'libvirt.yaml',
    renderSet({
      root,
      container,
      runId,
      noWarm: NO_WARM,
      ...(TRACE ? { trace: { file: TRACE_LOG_IN, filters: TRACE_FILTERS } } : {}),
    }),
  );
  await startSpcd();
  api = new SpcdApi(sb.socket);
  const first = await waitFor(
    'the libvirt container running and its API answering (health)',
    async () => {
      const c = await api.container(container);
      return c.state === 'running' && c.health === 'healthy' && c;
    },
    { timeoutMs: 180_000, intervalMs: 250 },
  );
  recordId(first.containerId);
  expect(first.image).toBe(IMAGE_9);
  const g = await vmsh('start-guest', [root, container, guest], 180_000);
  qemuPid = Number(g.qemu_pid);
  qemuStart = g.qemu_start ?? '';
  expect(qemuPid).toBeGreaterThan(1);
  expect(startTime(qemuPid)).toBe(qemuStart);
  await vmsh('wait-counter', [root, guest, 3, 180], 200_000);
  watchPgid = Number((await vmsh('console-watch', [root, guest])).watch_pgid);
  await vmsh('api-probe', [root, IMAGE_11, runId]);
  // spcd's VM probe must see the real qemu (libvirt puts it under /machine/qemu-N-NAME.libvirt-qemu).
  const seen = await new ProcVmProbe().runningVms();
  expect(seen.find((v) => v.pid === qemuPid)?.name).toMatch(new RegExp(`^qemu-\\d+-${guest}$`));
}, 30 * 60_000);

async function leftovers(): Promise<{ qemu: boolean; containers: number; machineCgroups: number }> {
  const qemu = qemuPid > 0 && startTime(qemuPid) === qemuStart;
  const ps = await run('/usr/bin/docker', ['ps', '-aq', '--filter', `label=spcd-e2e.run=${runId}`], 60_000);
  const mine = await run(
    '/usr/bin/docker',
    ['ps', '-aq', '--filter', `label=spcd.instance=${sb.instance}`],
    60_000,
  );
  let machineCgroups = 0;
  for (const h of readdirSync('/sys/fs/cgroup')) {
    const d = join('/sys/fs/cgroup', h, 'machine');
    if (!existsSync(d)) continue;
    machineCgroups += readdirSync(d).filter((n) => n.endsWith(`-${guest}.libvirt-qemu`)).length;
  }
  const containers = new Set(`${ps.stdout}\n${mine.stdout}`.split('\n').filter(Boolean)).size;
  return { qemu, containers, machineCgroups };
}

afterAll(async () => {
  let left: Awaited<ReturnType<typeof leftovers>> | undefined;
  tap?.close();
  await spcd?.stop();
  if (watchPgid > 0) {
    try {
      process.kill(-watchPgid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const trace = join(root, 'var/lib/libvirt/libvirtd-trace.log');
  if (TRACE && existsSync(trace)) {
    copyFileSync(trace, `/tmp/spcd-e2e-trace-${runId}.log`);
    console.log(`libvirtd trace: /tmp/spcd-e2e-trace-${runId}.log`);
  }
  if (process.env.SPCD_E2E_KEEP === '1') {
    console.log(`kept: root ${root}, guest ${guest}, containers labelled spcd-e2e.run=${runId}`);
  } else if (sb) {
    const c = await vmsh('cleanup', [root, guest, runId, qemuPid || '']).catch((e: Error) => ({
      error: e.message,
    }));
    console.log(`cleanup ${JSON.stringify(c)}`);
    await cleanupInstance(sb.instance);
    rmSync(sb.root, { recursive: true, force: true });
    // Nothing of this run may stay behind: its qemu, its containers, its guest's cgroups.
    left = await leftovers();
    console.log(`leftovers ${JSON.stringify(left)}`);
  }
  const passed = results.filter((r) => r.ok).length;
  const apiWindows = results.map((r) => r.apiBackS).filter((x) => Number.isFinite(x));
  const maxApi = apiWindows.length ? Math.max(...apiWindows).toFixed(2) : 'nan';
  const summary = `vm_survived=${passed}/${STEPS} max_api_window_s=${maxApi} downgrade_refused=${downgradeRefused}`;
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

describe('a real qemu guest survives libvirt container changes made through spcd', () => {
  const expectSurvived = (r: StepResult): void => {
    expect(r.failures, r.failures.join('; ')).toEqual([]);
    expect(r.ok).toBe(true);
  };

  it('1: upgrade libvirt 9 -> 11', async () => {
    expectSurvived(await survive('upgrade-9-to-11', () => upgradeVia(IMAGE_11)));
  }, 600_000);

  it('2: restart the libvirt container', async () => {
    const r = await survive('restart', async () => {
      const before = await api.container(container);
      const op = await api.post(`/v1/containers/${container}/restart`, {
        expectedGeneration: before.generation,
      });
      const fin = await tap!.finished(op, 240_000);
      if (fin.phase !== 'succeeded') throw new Error(`restart failed: ${JSON.stringify(fin.error)}`);
      const windowMs = Number(fin.result?.windowMs);
      const after = await api.container(container);
      await expectCensusOk(op, 'restart');
      expect(after.containerId).toBe(before.containerId);
      expect(after.startedAt).not.toBe(before.startedAt);
      // The restart reports stop+start only, and when its stop began (the census after the start comes later).
      const tStop = Date.parse(String(fin.result?.stoppedAt)) / 1000;
      expect(tStop).toBeGreaterThan(0);
      return {
        tStop,
        spcdWindowS: windowMs / 1000,
        spcdWindow: 'stopToRunning',
        ids: { old: before.containerId!, new: before.containerId! },
      };
    });
    expectSurvived(r);
  }, 600_000);

  it('3: upgrade to the same version, a new generation', async () => {
    expectSurvived(await survive('same-version-new-generation', () => upgradeVia(IMAGE_11)));
  }, 600_000);

  it('4: spcd killed with SIGKILL mid-upgrade (after the old libvirt stopped), then restarted', async () => {
    const r = await survive('sigkill-mid-upgrade', async () => {
      const before = await api.container(container);
      tap?.close();
      await spcd!.stop();
      await startSpcd({ SPCD_FAILPOINT: 'upgrade.after-stop-old' });
      const op = await api.post(`/v1/containers/${container}/upgrade`, {
        image: IMAGE_11,
        expectedGeneration: before.generation,
      });
      if ((await spcd!.exitWithin(240_000)) === 'still running')
        throw new Error('spcd did not reach the failpoint');
      expect(spcd!.child.signalCode).toBe('SIGKILL');
      const stop = tap!.find(
        (e) =>
          e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
      );
      if (!stop) throw new Error('no stop-old event before the crash');
      tap!.close();
      // While spcd is dead, the old libvirt is stopped: the guest runs with no daemon at all. spcd
      // passes this failpoint once the old one's processes are gone; the engine may still be
      // recording the stop (agent/executor/stop-old.ts).
      await waitFor(
        'the engine to report the old libvirt stopped',
        async () => (await inspect(before.containerId!))?.State.Running === false,
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      await startSpcd();
      const after = await waitFor(
        'recovery to put the previous generation back',
        async () => {
          const c = await api.container(container);
          return (
            c.state === 'running' &&
            c.containerId === before.containerId &&
            c.startedAt !== before.startedAt &&
            c
          );
        },
        { timeoutMs: 120_000, intervalMs: 100 },
      );
      expect(after.generation).toBe(before.generation);
      const gens = await api.generations(container);
      const undone = gens.find((g) => g.generation > before.generation);
      expect(undone?.outcome).toBe('rolled-back');
      expect(undone?.reason).toMatch(/interrupted at step stopping-old/);
      // spcd's own account: the stop-old event, and the start time it reports for the recovered container.
      const windowS = Date.parse(after.startedAt!) / 1000 - stop.at / 1000;
      return {
        tStop: stop.at / 1000,
        spcdWindowS: windowS,
        spcdWindow: 'stopToRecoveredStart',
        ids: { old: before.containerId!, new: before.containerId! },
        operationId: op,
      };
    });
    expectSurvived(r);
  }, 600_000);

  it('refuses a rollback to libvirt 9 while the guest runs (VM_SAFETY_REFUSED, with its reason)', async () => {
    const before = await api.container(container);
    const pidBefore = (await inspect(container))!.State.Pid;
    const gens = await api.generations(container);
    const v9 = gens.find((g) => g.image === IMAGE_9 && g.outcome !== 'rolled-back' && g.outcome !== 'failed');
    expect(v9, JSON.stringify(gens)).toBeDefined();
    const op = await api.post(`/v1/containers/${container}/rollback`, { toGeneration: v9!.generation });
    const fin = await tap!.finished(op, 120_000);
    console.log(`downgrade refusal: ${JSON.stringify(fin.error)}`);
    downgradeRefused = fin.phase === 'failed' && fin.error?.code === 'VM_SAFETY_REFUSED' ? 1 : 0;
    expect(fin.phase).toBe('failed');
    expect(fin.error?.code).toBe('VM_SAFETY_REFUSED');
    expect(fin.error?.message).toMatch(/downgrade .* from 11\.3\.0 to 9\.0\.0/);
    expect(fin.error?.message).toContain(guest);
    const after = await api.container(container);
    expect(after.containerId).toBe(before.containerId);
    expect(after.startedAt).toBe(before.startedAt);
    expect(after.generation).toBe(before.generation);
    expect((await inspect(container))!.State.Pid).toBe(pidBefore);
    expect(startTime(qemuPid)).toBe(qemuStart);
    expect(await virsh('domstate', guest)).toBe('running');
  }, 300_000);

  it('refuses to stop the libvirt container for a definition without the /sys/fs/cgroup bind (SIGHUP reload)', async () => {
    const before = await api.container(container);
    const pidBefore = (await inspect(container))!.State.Pid;
    writeSet(
      sb,
      'libvirt.yaml',
      renderSet({ root, container, runId, image: IMAGE_11, dropCgroupBind: true }),
    );
    const hupAt = Date.now();
    spcd!.child.kill('SIGHUP');
    await tap!.wait('the reload', (e) => e.type === 'reload' && e.ok === true, 60_000);
    const refused = await waitFor(
      'the reload-triggered recreate to be refused',
      async () => {
        const c = await api.container(container);
        // lastError may still hold the downgrade refusal: wait for this one.
        return (
          c.lastError?.code === 'VM_SAFETY_REFUSED' &&
          c.lastError.message.includes('cgroup-bind') &&
          Date.parse(c.lastError.at) >= hupAt - 1000 &&
          c
        );
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}; container: ${JSON.stringify(await api.container(container))}`);
    });
    console.log(`definition refusal: ${JSON.stringify(refused.lastError)}`);
    expect(refused.lastError?.message).toContain('cgroup-bind');
    const c = await inspect(container);
    expect(c!.Id).toBe(before.containerId);
    expect(c!.State.Running).toBe(true);
    expect(c!.State.Pid).toBe(pidBefore);
    expect(c!.State.StartedAt).toBe(before.startedAt);
    expect(startTime(qemuPid)).toBe(qemuStart);
    expect(await virsh('domstate', guest)).toBe('running');
  }, 300_000);
});
