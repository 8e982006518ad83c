/**
 * Where a libvirt swap's window goes (issue 12 part 5): one timeline per
 * step, from three clocks that are all the host's wall clock:
 *   - spcd's own step events (`upgrade-step` begin/done, `at` in ms);
 *   - the engine's events for the run's containers (its events API, ns);
 *   - libvirtd's own log, when the set was rendered with `trace` (the
 *     daemon's LIBVIRT_LOG_OUTPUTS writes a timestamped debug log of a few
 *     categories into the bound /var/lib/libvirt, so both the old and the
 *     new daemon append to one file).
 * Every time is printed in seconds after the stop call (spcd's `stop-old`
 * begin), so the phases read left to right.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { lineSplitter } from '../../agent/engine/lines.js';
import type { SpcdEventLine } from './libvirt-e2e-harness.js';
import { docker } from '../support/docker.js';

/** The libvirt log categories the trace keeps at debug level (the rest stays at warning). */
export const TRACE_FILTERS = '1:daemon 1:libvirt 1:qemu.qemu_driver 1:qemu.qemu_process 1:rpc.netdaemon';
/** Inside the container: in the bound /var/lib/libvirt (which exists in the warm task's private tmpfs too, or its libvirtd could not open the log). */
export const TRACE_LOG_IN = '/var/lib/libvirt/libvirtd-trace.log';

export type Phases = Record<string, number>;

/** spcd's step events of one operation, as `<step>_<begin|done>` → epoch seconds. */
export function spcdPhases(events: readonly SpcdEventLine[], operationId: string): Phases {
  const out: Phases = {};
  for (const e of events) {
    if (e.type !== 'upgrade-step' || e.operationId !== operationId || !e.step || !e.outcome) continue;
    const key = `spcd_${e.step.replace(/[^a-z0-9]+/gi, '_')}_${e.outcome}`;
    if (out[key] === undefined) out[key] = e.at / 1000;
  }
  return out;
}

/**
 * The engine's kill/die/stop/start events of the old and the new container
 * between from and to (epoch seconds): `engine_<action>_<old|new>`.
 */
export async function enginePhases(
  runLabel: string,
  ids: { old: string; new: string },
  from: number,
  to: number,
): Promise<Phases> {
  const out: Phases = {};
  for (const e of await engineEventsBetween(from, to)) {
    if (e.Actor?.Attributes?.['spcd-e2e.run'] !== runLabel) continue;
    if (e.timeNano < from * 1e9 || e.timeNano > to * 1e9) continue;
    const action = ENGINE_ACTION[e.Action] ?? e.Action;
    if (!['kill', 'die', 'stop', 'start'].includes(action)) continue;
    const who = e.id === ids.old ? 'old' : e.id === ids.new ? 'new' : undefined;
    if (!who) continue;
    const key = `engine_${action}_${who}`;
    if (out[key] === undefined) out[key] = e.timeNano / 1e9;
  }
  return out;
}

/** Some Podman versions say `died` where Docker says `die` (agent/engine/dialect.ts reads both too). */
const ENGINE_ACTION: Record<string, string> = { died: 'die' };

interface EngineEvent {
  readonly id?: string;
  readonly Action: string;
  readonly timeNano: number;
  readonly Actor?: { readonly Attributes?: Record<string, string> };
}

/** The engine's container events between two epoch times (whole seconds around them), through its API (Docker's or Podman's). */
async function engineEventsBetween(from: number, to: number): Promise<EngineEvent[]> {
  const stream = (await docker().getEvents({
    since: Math.floor(from),
    until: Math.ceil(to),
    filters: { type: ['container'] },
  })) as unknown as Readable;
  const lines: EngineEvent[] = [];
  const done = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  stream.on(
    'data',
    lineSplitter((l) => lines.push(JSON.parse(l) as EngineEvent)),
  );
  const deadline = setTimeout(() => stream.destroy(new Error('engine events: no end within 60 s')), 60_000);
  try {
    await done;
  } finally {
    clearTimeout(deadline);
  }
  return lines;
}

const LINE = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\+0000: (\d+): \w+ : (\S+?):\d+ : (.*)$/;

/**
 * libvirtd's phases after `from` (epoch seconds) from the trace log:
 * the old daemon's quit request, the new daemon's main (pid file chosen,
 * sockets next), its QEMU driver state init begin and end, the first
 * monitor reconnect, and the first RPC call it dispatched.
 */
export function libvirtdPhases(traceFile: string, from: number): Phases {
  if (!existsSync(traceFile)) return {};
  const out: Phases = {};
  const set = (k: string, t: number): void => {
    if (out[k] === undefined) out[k] = t;
  };
  let qemuInitThread = '';
  for (const line of readFileSync(traceFile, 'utf8').split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    const t = Date.parse(`${m[1]!.replace(' ', 'T')}Z`) / 1000;
    if (t < from - 0.05) continue;
    const [, , thread, fn, msg] = m as unknown as [string, string, string, string, string];
    if (fn === 'virNetDaemonQuit') set('libvirtd_quit_old', t);
    else if (fn === 'main' && msg.startsWith('Decided on pid file')) set('libvirtd_main_new', t);
    else if (fn === 'virStateInitialize' && msg.includes('global init for QEMU')) {
      set('libvirtd_qemu_init_begin', t);
      qemuInitThread = thread;
    } else if (
      fn === 'virStateInitialize' &&
      msg.startsWith('State init result') &&
      thread === qemuInitThread
    )
      set('libvirtd_qemu_init_end', t);
    else if (fn === 'qemuProcessReconnect') set('libvirtd_reconnect', t);
    else if (fn === 'virNetServerProgramDispatch' || fn.startsWith('remoteDispatch'))
      if (out.libvirtd_main_new !== undefined) set('libvirtd_first_rpc', t);
  }
  return out;
}

/** `phases step=NAME k=+s.sss ...` relative to t0, in time order. */
export function formatPhases(step: string, t0: number, phases: Phases): string {
  const parts = Object.entries(phases)
    .filter(([, t]) => Number.isFinite(t))
    .sort((a, b) => a[1] - b[1])
    .map(([k, t]) => `${k}=${(t - t0).toFixed(3)}`);
  return `phases step=${step} ${parts.join(' ')}`;
}
