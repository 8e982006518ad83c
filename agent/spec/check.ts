import { validate as validateCron } from 'node-cron';
import type { CheckAction, CheckProbe, CheckSchedule, CheckSpec } from '../model/spec.js';
import type { Mapping, Reader } from './read.js';
import type { KeyPos, Where } from './where.js';

/** Health check entries (`healthchecks:` items and check-library templates) -> CheckSpec. */

export const CHECK_DEFAULTS = {
  intervalMs: 10_000,
  timeoutMs: 5_000,
  startPeriodMs: 0,
  failureThreshold: 3,
  successThreshold: 1,
  action: 'restart' as CheckAction,
  maxOutputBytes: 4096,
} as const;

export const MAX_CHECK_OUTPUT = 1024 * 1024;
export const CHECK_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export const PROBE_KEYS = ['exec', 'shell', 'tcp', 'http', 'process', 'established'] as const;
export const SCHEDULE_KEYS = ['interval', 'cron'] as const;
const FIELD_KEYS = [
  'name',
  ...PROBE_KEYS,
  'expect_status',
  ...SCHEDULE_KEYS,
  'timeout',
  'start_period',
  'start_interval',
  'failure_threshold',
  'success_threshold',
  'action',
  'max_output',
  'dependency',
] as const;
export const CHECK_KEYS = [...FIELD_KEYS, 'use', 'args'] as const;
export const TEMPLATE_KEYS = FIELD_KEYS.filter((k) => k !== 'name');
export const ACTIONS: readonly CheckAction[] = ['restart', 'stop', 'none'];
/** `tcp:` host:port, `process:` a comm, `established.process`: a comm or program base name. */
export const TCP_TARGET = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/;
export const PROCESS_COMM = /^[^/\0\n]{1,15}$/;
export const PROCESS_NAME = /^[A-Za-z0-9_.+@-]{1,64}$/;
/** `dependency:` a short name of the service outside the container the check watches. */
export const DEPENDENCY_NAME = /^[a-z0-9_-]{1,63}$/;
const DEP = {
  pattern: DEPENDENCY_NAME,
  what: 'a dependency name (lowercase letters, digits, "-" and "_", at most 63 characters)',
};

/** A named check template from the library file, kept raw so entries can override fields. */
export interface CheckTemplate {
  readonly raw: Mapping;
  readonly where: Where;
}
export type CheckLibrary = ReadonlyMap<string, CheckTemplate>;

/** Validates one library template (its fields, with the template's name). */
export function validateTemplate(
  r: Reader,
  name: string,
  raw: unknown,
  where: Where,
): CheckTemplate | undefined {
  const m = r.mapping(raw, where, TEMPLATE_KEYS);
  if (!m) return undefined;
  const before = r.problems.count;
  validateFields(r, name, m, where);
  return r.problems.count === before ? { raw: m, where } : undefined;
}

/** Validates one `healthchecks:` entry, resolving `use:` against the library. */
export function validateCheck(
  r: Reader,
  raw: unknown,
  where: Where,
  library: CheckLibrary | undefined,
): CheckSpec | undefined {
  const m = r.mapping(raw, where, CHECK_KEYS);
  if (!m) return undefined;
  if (m.use === undefined) {
    if (m.args !== undefined) r.fail(r.child(m, 'args', where), 'args is only allowed together with use');
    if (m.name === undefined) {
      r.fail(where, 'name is required (or use a library check with use)');
      return undefined;
    }
    const name = r.string(m.name, r.child(m, 'name', where), {
      pattern: CHECK_NAME,
      what: 'a check name ([a-z0-9][a-z0-9_.-]*)',
    });
    return name === undefined ? undefined : validateFields(r, name, m, where);
  }

  const useWhere = r.child(m, 'use', where);
  const use = r.string(m.use, useWhere);
  if (use === undefined) return undefined;
  if (!library) {
    r.fail(useWhere, `no check library is configured, so "use: ${use}" cannot be resolved`);
    return undefined;
  }
  const template = library.get(use);
  if (!template) {
    const known = [...library.keys()].sort().join(', ') || 'none';
    r.fail(useWhere, `no check named "${use}" in the check library (known: ${known})`);
    return undefined;
  }
  const merged = mergeTemplate(r, template, m, where);
  if (!merged) return undefined;
  let name = use;
  if (m.name !== undefined) {
    const n = r.string(m.name, r.child(m, 'name', where), {
      pattern: CHECK_NAME,
      what: 'a check name ([a-z0-9][a-z0-9_.-]*)',
    });
    if (n === undefined) return undefined;
    name = n;
  }
  return validateFields(r, name, merged, where);
}

/**
 * Template fields, then the entry's fields over them. An entry that names a
 * probe replaces the template's probe (and expect_status); one that names a
 * schedule replaces the template's schedule. `args` are appended to exec.
 */
function mergeTemplate(r: Reader, t: CheckTemplate, entry: Mapping, where: Where): Mapping | undefined {
  const merged: Mapping = {};
  const keys = new Map<string, KeyPos>();
  const entryProbe = PROBE_KEYS.some((k) => entry[k] !== undefined);
  const entrySchedule = SCHEDULE_KEYS.some((k) => entry[k] !== undefined);
  for (const [k, v] of Object.entries(t.raw)) {
    if (entryProbe && ((PROBE_KEYS as readonly string[]).includes(k) || k === 'expect_status')) continue;
    if (entrySchedule && (SCHEDULE_KEYS as readonly string[]).includes(k)) continue;
    merged[k] = v;
    keys.set(k, r.loc.keyPos(t.raw, k, t.where));
  }
  for (const [k, v] of Object.entries(entry)) {
    if (k === 'use' || k === 'args' || k === 'name') continue;
    merged[k] = v;
    keys.set(k, r.loc.keyPos(entry, k, where));
  }
  if (entry.args !== undefined) {
    const argsWhere = r.child(entry, 'args', where);
    const args = r.strings(entry.args, argsWhere);
    if (args === undefined) return undefined;
    const exec = merged.exec;
    if (!Array.isArray(exec)) {
      r.fail(argsWhere, 'args need a check whose probe is exec');
      return undefined;
    }
    const execPos = keys.get('exec');
    const execWhere = { file: execPos?.file ?? where.file, line: execPos?.line ?? where.line };
    const argv = [...(exec as unknown[]), ...args];
    const execInfo = r.loc.info(exec);
    const argsInfo = r.loc.info(entry.args);
    r.loc.register(argv, {
      file: execWhere.file,
      line: execWhere.line,
      items: [
        ...exec.map((_, i) => execInfo?.items?.[i] ?? execWhere.line),
        ...args.map((_, i) => argsInfo?.items?.[i] ?? argsWhere.line),
      ],
    });
    merged.exec = argv;
  }
  r.loc.register(merged, { file: where.file, line: where.line, keys });
  return merged;
}

function validateFields(r: Reader, name: string, m: Mapping, where: Where): CheckSpec | undefined {
  const at = (k: string): Where => r.child(m, k, where);
  const before = r.problems.count;

  const probe = readProbe(r, m, where);
  const schedule = readSchedule(r, m, where);
  const timeoutMs =
    m.timeout === undefined ? CHECK_DEFAULTS.timeoutMs : r.duration(m.timeout, at('timeout'), 1);
  const startPeriodMs =
    m.start_period === undefined
      ? CHECK_DEFAULTS.startPeriodMs
      : r.duration(m.start_period, at('start_period'), 0);
  const startIntervalMs =
    m.start_interval === undefined ? undefined : r.duration(m.start_interval, at('start_interval'), 100);
  const failureThreshold =
    m.failure_threshold === undefined
      ? CHECK_DEFAULTS.failureThreshold
      : r.integer(m.failure_threshold, at('failure_threshold'), 1, 1000);
  const successThreshold =
    m.success_threshold === undefined
      ? CHECK_DEFAULTS.successThreshold
      : r.integer(m.success_threshold, at('success_threshold'), 1, 1000);
  const dependency = m.dependency === undefined ? undefined : r.string(m.dependency, at('dependency'), DEP);
  const action = readAction(r, m, where, m.dependency !== undefined);
  const maxOutputBytes =
    m.max_output === undefined
      ? CHECK_DEFAULTS.maxOutputBytes
      : r.size(m.max_output, at('max_output'), 0, MAX_CHECK_OUTPUT);

  if (schedule?.kind === 'interval' && timeoutMs !== undefined && timeoutMs >= schedule.intervalMs) {
    r.fail(
      m.timeout === undefined ? at('interval') : at('timeout'),
      `timeout (${timeoutMs} ms) must be shorter than interval (${schedule.intervalMs} ms)`,
    );
    return undefined;
  }
  if (startIntervalMs !== undefined && r.problems.count === before) {
    const problem =
      schedule?.kind !== 'interval'
        ? 'start_interval needs an interval schedule, not cron'
        : !startPeriodMs
          ? 'start_interval needs a start_period (it applies only within it)'
          : startIntervalMs > schedule.intervalMs
            ? `start_interval (${startIntervalMs} ms) must not be longer than interval (${schedule.intervalMs} ms)`
            : undefined;
    if (problem) {
      r.fail(at('start_interval'), problem);
      return undefined;
    }
  }
  if (
    r.problems.count !== before ||
    !probe ||
    !schedule ||
    timeoutMs === undefined ||
    startPeriodMs === undefined ||
    failureThreshold === undefined ||
    successThreshold === undefined ||
    action === undefined ||
    maxOutputBytes === undefined
  ) {
    return undefined;
  }
  return {
    name,
    probe,
    schedule,
    timeoutMs,
    startPeriodMs,
    ...(startIntervalMs !== undefined ? { startIntervalMs } : {}),
    failureThreshold,
    successThreshold,
    action,
    maxOutputBytes,
    ...(dependency !== undefined ? { dependency } : {}),
  };
}

/**
 * `action:`, default restart. A dependency check never restarts or stops its
 * container: its action is none, and one that says restart or stop is refused.
 */
function readAction(r: Reader, m: Mapping, where: Where, dependency: boolean): CheckAction | undefined {
  if (m.action === undefined) return dependency ? 'none' : CHECK_DEFAULTS.action;
  const action = r.oneOf(m.action, r.child(m, 'action', where), ACTIONS);
  if (!dependency || action === undefined || action === 'none') return action;
  r.fail(
    r.child(m, 'action', where),
    `a dependency check never restarts or stops its container: action must be none (got ${action}), or leave it out`,
  );
  return undefined;
}

function readProbe(r: Reader, m: Mapping, where: Where): CheckProbe | undefined {
  const at = (k: string): Where => r.child(m, k, where);
  const kinds = PROBE_KEYS.filter((k) => m[k] !== undefined);
  if (kinds.length !== 1) {
    r.fail(
      kinds.length === 0 ? where : at(kinds[1] ?? 'exec'),
      kinds.length === 0
        ? 'needs exactly one probe: exec, shell, tcp, http, process or established'
        : `gives more than one probe (${kinds.join(', ')}); keep exactly one`,
    );
    return undefined;
  }
  const kind = kinds[0];
  if (m.expect_status !== undefined && kind !== 'http') {
    r.fail(at('expect_status'), 'expect_status is only allowed with an http probe');
    return undefined;
  }
  switch (kind) {
    case 'exec': {
      const argv = r.strings(m.exec, at('exec'), { nonEmpty: true });
      return argv && { kind: 'exec', argv };
    }
    case 'shell': {
      const cmd = r.string(m.shell, at('shell'));
      return cmd === undefined ? undefined : { kind: 'exec', argv: ['/bin/sh', '-c', cmd] };
    }
    case 'tcp':
      return readTcp(r, m.tcp, at('tcp'));
    case 'http': {
      const url = readUrl(r, m.http, at('http'));
      let expectStatus: number[] = [];
      if (m.expect_status !== undefined) {
        const w = at('expect_status');
        const list = r.list(m.expect_status, w);
        if (!list) return undefined;
        const codes = list.map((c, i) => r.integer(c, r.child(list, i, w), 100, 599));
        if (codes.some((c) => c === undefined)) return undefined;
        expectStatus = [...new Set(codes as number[])].sort((a, b) => a - b);
      }
      return url === undefined ? undefined : { kind: 'http', url, expectStatus };
    }
    case 'process': {
      const comm = r.string(m.process, at('process'), {
        pattern: PROCESS_COMM,
        what: 'a process name as in /proc/<pid>/comm (at most 15 characters, no "/")',
      });
      return comm === undefined ? undefined : { kind: 'process', comm };
    }
    case 'established':
      return readEstablished(r, m.established, at('established'));
    default:
      return undefined;
  }
}

/** `established: {process: nova-compute, ports: [5672]}`: Kolla's `healthcheck_port nova-compute 5672`. */
function readEstablished(r: Reader, value: unknown, where: Where): CheckProbe | undefined {
  const m = r.mapping(value, where, ['process', 'ports']);
  if (!m) return undefined;
  const at = (k: string): Where => r.child(m, k, where);
  if (m.process === undefined) r.fail(where, 'process is required');
  if (m.ports === undefined) r.fail(where, 'ports is required (a list of TCP ports, e.g. [5672])');
  const process =
    m.process === undefined
      ? undefined
      : r.string(m.process, at('process'), {
          pattern: PROCESS_NAME,
          what: 'a process name (its comm, or the base name of its program or script)',
        });
  const list = m.ports === undefined ? undefined : r.list(m.ports, at('ports'));
  if (list && list.length === 0) r.fail(at('ports'), 'must name at least one port');
  const ports = list?.map((p, i) => r.integer(p, r.child(list, i, at('ports')), 1, 65535));
  if (!process || !ports || ports.length === 0 || ports.some((p) => p === undefined)) return undefined;
  return { kind: 'established', process, ports: [...new Set(ports as number[])].sort((a, b) => a - b) };
}

function readTcp(r: Reader, value: unknown, where: Where): CheckProbe | undefined {
  const text = r.string(value, where);
  if (text === undefined) return undefined;
  const m = TCP_TARGET.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) {
    r.fail(where, `${JSON.stringify(text)} is not "host:port" (e.g. 127.0.0.1:5672 or [::1]:5672)`);
    return undefined;
  }
  return { kind: 'tcp', host: m[1] ?? m[2] ?? '', port };
}

function readUrl(r: Reader, value: unknown, where: Where): string | undefined {
  const text = r.string(value, where);
  if (text === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    r.fail(where, `${JSON.stringify(text)} is not a URL`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    r.fail(where, `${JSON.stringify(text)} must be an http:// or https:// URL`);
    return undefined;
  }
  return text;
}

function readSchedule(r: Reader, m: Mapping, where: Where): CheckSchedule | undefined {
  const at = (k: string): Where => r.child(m, k, where);
  if (m.interval !== undefined && m.cron !== undefined) {
    r.fail(at('cron'), 'interval and cron are mutually exclusive');
    return undefined;
  }
  if (m.cron !== undefined) {
    const expression = r.string(m.cron, at('cron'));
    if (expression === undefined) return undefined;
    if (!validateCron(expression)) {
      r.fail(at('cron'), `${JSON.stringify(expression)} is not a valid cron expression`);
      return undefined;
    }
    return { kind: 'cron', expression };
  }
  const intervalMs =
    m.interval === undefined ? CHECK_DEFAULTS.intervalMs : r.duration(m.interval, at('interval'), 1000);
  return intervalMs === undefined ? undefined : { kind: 'interval', intervalMs };
}
