/**
 * The machinery of the libvirt VM-continuity test (test/integration/libvirt-e2e.test.ts):
 * its stand (the guest up before the steps, the summary and the clean-up after),
 * the step runner that measures a guest's survival, and the run's state.
 */
import { appendFileSync, existsSync, readdirSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { SpcdApi } from './libvirt-e2e-harness.js';
import { EventTap, run, startTime, vmsh, type BuildCost } from './libvirt-e2e-harness.js';
import { renderSet, type SetRendering } from './libvirt-e2e-harness.js';
import { enginePhases, formatPhases, libvirtdPhases, spcdPhases, type Phases } from './libvirt-phases.js';
import { SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { ENGINE_CLI, ON_PODMAN } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/** What the run holds between its steps: set by the stand's beforeAll and by the steps. */
export const e2e = {
  downgradeRefused: 0 as number,
  build: undefined as BuildCost | undefined,
  sb: undefined as unknown as Sandbox as Sandbox,
  root: '' as string,
  container: '' as string,
  guest: '' as string,
  runId: '' as string,
  spcd: undefined as SpcdProcess | undefined,
  tap: undefined as EventTap | undefined,
  api: undefined as unknown as SpcdApi as SpcdApi,
  qemuPid: 0 as number,
  qemuStart: '' as string,
  watchPgid: 0 as number,
};

/** The guest prints one counter line per second. */
export const TICK_S = 1.0;
/**
 * Host-side slack on top of one tick: the console watcher polls the file every
 * 0.1 s (stamps late by up to that, at either end of a gap) and a TCG guest's
 * timer slips under load (phase 1 saw gaps of up to 1.59 s with no outage at
 * all at load ~14).
 */
export const SLACK_S = 0.6;
export const SPCD_ARGS = ['--gate-deadline', '90s', '--relist-interval', '2s'];
/** SPCD_E2E_NO_WARM=1: without the bootstrap task that warms qemu's capabilities cache (to measure what it saves). */
export const NO_WARM = process.env.SPCD_E2E_NO_WARM === '1';
/** SPCD_E2E_TRACE=1: libvirtd logs its start-up and shutdown with timestamps, for the phase timelines (libvirt-phases.ts). */
export const TRACE = process.env.SPCD_E2E_TRACE === '1';

export interface StepResult {
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

export const results: StepResult[] = [];
export const STEPS = 4;

export function recordId(id: string | null | undefined): void {
  if (id) appendFileSync(join(e2e.root, 'probe', 'containers'), `${id}\n`);
}

export async function startSpcd(env: NodeJS.ProcessEnv = {}): Promise<void> {
  const p = SpcdProcess.start(e2e.sb, SPCD_ARGS, env);
  e2e.spcd = p;
  await p.readyOrExit(120_000);
  e2e.tap = await EventTap.open(e2e.sb.socket);
}

export async function counterNow(): Promise<number> {
  return Number((await vmsh('wait-counter', [e2e.root, e2e.guest, 0, 30])).counter);
}

export async function virsh(...args: string[]): Promise<string> {
  const r = await run(
    ENGINE_CLI,
    ['exec', e2e.container, 'virsh', '-q', '-c', 'qemu:///system', ...args],
    60_000,
  );
  return r.stdout.trim();
}

export interface Acted {
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
export async function phasesOf(a: Acted, apiBackS: number): Promise<Phases> {
  const until = Date.now() / 1000;
  const p: Phases = {
    ...(a.operationId ? spcdPhases(e2e.tap?.events ?? [], a.operationId) : {}),
    ...(a.ids ? await enginePhases(e2e.runId, a.ids, a.tStop - 1, until) : {}),
    ...libvirtdPhases(join(e2e.root, 'var/lib/libvirt/libvirtd-trace.log'), a.tStop),
  };
  if (Number.isFinite(apiBackS)) p.probe_api_back = a.tStop + apiBackS;
  p.stop_call = a.tStop;
  return p;
}

/** Runs one transition and checks the guest through it; records the result. */
export async function survive(step: string, act: () => Promise<Acted>): Promise<StepResult> {
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
    await vmsh('wait-counter', [e2e.root, e2e.guest, c0 + 2, 60]);
    const a = await act();
    r.spcdWindowS = a.spcdWindowS;
    r.spcdWindow = a.spcdWindow;
    const apiWin = await waitFor(
      'the libvirt API probe to see the API back',
      () => vmsh('api-window', [e2e.root, a.tStop.toFixed(6)]),
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
    await vmsh('wait-counter', [e2e.root, e2e.guest, c1 + 3, 60]);
    const cg = await vmsh('console-gap', [
      e2e.root,
      e2e.guest,
      (a.tStop - 2).toFixed(6),
      (Date.now() / 1000).toFixed(6),
    ]);
    r.consoleMaxGapS = Number(cg.console_max_gap_s);
    r.counterMissing = Number(cg.counter_missing);
    r.allowedGapS = a.spcdWindowS + TICK_S + SLACK_S;
    const q = await vmsh('qemu-pid', [e2e.root, e2e.guest, e2e.qemuPid]);
    r.qemuPid = Number(q.qemu_pid);
    r.qemuStartSame = q.qemu_start === e2e.qemuStart && startTime(e2e.qemuPid) === e2e.qemuStart;
    if (r.qemuPid !== e2e.qemuPid) r.failures.push(`qemu pid ${r.qemuPid} != ${e2e.qemuPid}`);
    if (!r.qemuStartSame) r.failures.push(`qemu start time ${q.qemu_start} != ${e2e.qemuStart}`);
    if (q.qemu_alive !== '1') r.failures.push('qemu not alive');
    if (r.counterMissing !== 0) r.failures.push(`${r.counterMissing} console counter value(s) missing`);
    if (!(r.consoleMaxGapS <= r.allowedGapS))
      r.failures.push(`console gap ${r.consoleMaxGapS} s > allowed ${r.allowedGapS.toFixed(2)} s`);
    r.domstate = (await vmsh('domstate', [e2e.container, e2e.guest])).domstate ?? '';
    if (r.domstate !== 'running') r.failures.push(`domstate ${r.domstate} in the current container`);
    else {
      r.suspendResume = await vmsh('suspend-resume', [e2e.container, e2e.guest]).then(
        (x) => x.suspend_resume ?? 'failed',
        () => 'failed',
      );
      if (r.suspendResume !== 'ok') r.failures.push('suspend/resume through the new daemon failed');
    }
    r.persistent = /^Persistent:\s+(\S+)/m.exec(await virsh('dominfo', e2e.guest))?.[1] ?? '';
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
export async function upgradeVia(image: string): Promise<Acted> {
  const before = await e2e.api.container(e2e.container);
  const op = await e2e.api.post(`/v1/containers/${e2e.container}/upgrade`, {
    image,
    expectedGeneration: before.generation,
  });
  const fin = await e2e.tap!.finished(op, 240_000);
  if (fin.phase !== 'succeeded') throw new Error(`upgrade failed: ${JSON.stringify(fin.error)}`);
  const stop = e2e.tap!.find(
    (e) =>
      e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
  );
  if (!stop) throw new Error('no stop-old step event');
  const w = fin.result?.window as { stopToRunningMs: number; stopToHealthyMs: number };
  const after = await e2e.api.container(e2e.container);
  recordId(after.containerId);
  await expectCensusOk(op, 'upgrade');
  expect(after.generation).toBe(before.generation + 1);
  expect(after.image).toBe(image);
  expect(after.containerId).not.toBe(before.containerId);
  const warm = ['begin', 'done'].map(
    (o) =>
      e2e.tap!.find(
        (e) =>
          e.type === 'upgrade-step' &&
          e.operationId === op &&
          e.step === 'bootstrap:warm-qemu-caps' &&
          e.outcome === o,
      )?.at,
  );
  const warmS = warm[0] && warm[1] ? ((warm[1] - warm[0]) / 1000).toFixed(2) : 'none';
  // Which qemu capabilities the new libvirt had to probe itself: cache files written after the stop.
  const capsDir = join(e2e.root, 'var/cache/libvirt/qemu/capabilities');
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
export async function expectCensusOk(op: string, action: string): Promise<void> {
  const e = e2e.tap!.find((x) => x.type === 'census' && x.operationId === op);
  expect(e, `no census event for ${op}`).toBeDefined();
  const uuid = await virsh('domuuid', e2e.guest);
  expect(e).toMatchObject({ outcome: 'ok', action, before: [uuid], after: [uuid], missing: [], added: [] });
  const c = await e2e.api.container(e2e.container);
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

/** Writes the run's libvirt set (its root, container and run id) with `more` of its options. */
export function writeLibvirtSet(more: Omit<SetRendering, 'root' | 'container' | 'runId' | 'podman'>): void {
  writeSet(
    e2e.sb,
    'libvirt.yaml',
    renderSet({ root: e2e.root, container: e2e.container, runId: e2e.runId, podman: ON_PODMAN, ...more }),
  );
}
