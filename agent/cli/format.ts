/** Human output: plain aligned tables, no colour, one row per thing. */
import type {
  ContainerHealthView,
  ContainerStatus,
  GenerationView,
  PlanView,
  SetStatus,
  StatusDocument,
} from '../api/types.js';
import type { SpcdEvent } from '../model/events.js';
import { escapeControl } from '../model/text.js';

/** Every cell is shown escaped (names, images, messages and outputs are user or container text). */
export function table(headers: readonly string[], cells: readonly (readonly string[])[]): string {
  const rows = cells.map((r) => r.map((c) => escapeControl(c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

export function allContainers(sets: readonly SetStatus[]): ContainerStatus[] {
  const out: ContainerStatus[] = [];
  const walk = (l: readonly SetStatus[]): void => {
    for (const s of l) {
      out.push(...s.containers);
      walk(s.sets);
    }
  };
  walk(sets);
  return out;
}

const dash = (v: string | null | undefined): string => (v === null || v === undefined || v === '' ? '-' : v);

function lastError(c: ContainerStatus): string {
  if (c.lastError) return `${c.lastError.code}: ${oneLine(c.lastError.message, 60)}`;
  return c.untouched ? `left as it is: ${oneLine(c.untouched, 60)}` : '-';
}

/** The first non-blank line, control characters escaped, cut at max characters. */
export function oneLine(text: string, max: number): string {
  const first = escapeControl((text.split('\n').find((l) => l.trim() !== '') ?? '').trim());
  return first.length > max ? first.slice(0, max - 1) + '…' : first;
}

const short = (v: string | null, n: number): string => (v ? v.slice(0, n) : '-');

/** The container's own health, then the dependencies its dependency checks see down: "healthy; rabbitmq down". */
export function healthCell(c: ContainerStatus): string {
  const down = [
    ...new Set((c.dependencies ?? []).filter((d) => d.status === 'down').map((d) => d.dependency)),
  ];
  return down.length === 0 ? c.health : `${c.health}; ${down.join(', ')} down`;
}

/** The columns `-o wide` adds to a container's row: digest, container id, start time. */
function wideCells(c: ContainerStatus): string[] {
  return [short(c.imageDigest, 19), short(c.containerId, 12), dash(c.startedAt)];
}
const WIDE_HEADERS = ['DIGEST', 'CONTAINER ID', 'STARTED'];

export function formatStatus(doc: StatusDocument, wide = false): string {
  const engine = doc.engine.available
    ? `available${doc.engine.version ? ` (${doc.engine.version})` : ''}`
    : `UNAVAILABLE${doc.engine.reason ? ` (${doc.engine.reason})` : ''}`;
  const lost = doc.stateRecovery;
  const head =
    `${escapeControl(`spcd ${doc.version}  instance ${doc.instance}  engine ${engine}`)}\n` +
    (lost
      ? `STATE RECOVERED at ${lost.at}: ${oneLine(lost.reason, 100)}; old file kept at ${lost.movedTo ?? '(could not be moved)'}; rebuilt from labels: ${lost.rebuilt.join(', ') || '-'}${lost.rebuildError ? ` (not yet written: ${oneLine(lost.rebuildError, 60)})` : ''}\n`
      : '');
  const headers = ['SET/CONTAINER', 'GEN', 'STATE', 'HEALTH', 'RESTARTS', 'IMAGE'];
  if (wide) headers.push(...WIDE_HEADERS);
  headers.push('LAST ERROR');
  const rows: string[][] = [];
  const heading = (text: string): number => rows.push([text, ...headers.slice(1).map(() => '')]);
  const row = (c: ContainerStatus, depth: number): number =>
    rows.push([
      `${'  '.repeat(depth)}${c.name}`,
      String(c.generation),
      c.state,
      healthCell(c),
      String(c.restartCount),
      c.image,
      ...(wide ? wideCells(c) : []),
      lastError(c),
    ]);
  const walk = (sets: readonly SetStatus[], depth: number): void => {
    for (const s of sets) {
      heading(`${'  '.repeat(depth)}${s.path}/`);
      for (const c of s.containers) row(c, depth + 1);
      walk(s.sets, depth + 1);
    }
  };
  walk(doc.sets, 0);
  if (doc.retained && doc.retained.length > 0) {
    heading('(definition deleted)');
    for (const c of doc.retained) row(c, 1);
  }
  return head + table(headers, rows);
}

export function formatPs(containers: readonly ContainerStatus[], wide = false): string {
  return table(
    [
      'NAME',
      'SET',
      'GEN',
      'STATE',
      'HEALTH',
      'RESTARTS',
      'IMAGE',
      ...(wide ? [...WIDE_HEADERS, 'OPERATION'] : []),
    ],
    containers.map((c) => [
      c.name,
      c.set,
      String(c.generation),
      c.state,
      healthCell(c),
      String(c.restartCount),
      c.image,
      ...(wide ? [...wideCells(c), dash(c.operation)] : []),
    ]),
  );
}

export function formatHealth(h: ContainerHealthView): string {
  const head = `${escapeControl(`${h.name}: ${h.status}${h.dockerHealth ? `  (docker HEALTHCHECK: ${h.dockerHealth})` : ''}`)}\n`;
  if (h.checks.length === 0) return head + 'no checks defined\n';
  const deps = h.checks.some((c) => c.dependency !== undefined);
  const rows = h.checks.map((c) => {
    const last = c.history[c.history.length - 1];
    const result = !last ? '-' : last.ok ? 'ok' : last.timedOut ? 'timeout' : `exit ${last.exitCode ?? '?'}`;
    return [
      c.name,
      ...(deps ? [dash(c.dependency)] : []),
      c.status,
      String(c.consecutiveFailures),
      String(c.consecutiveSuccesses),
      last ? last.at : '-',
      result,
      last ? `${last.durationMs}ms` : '-',
      last ? dash(oneLine(last.output, 60)) : '-',
    ];
  });
  const headers = ['CHECK', ...(deps ? ['DEPENDENCY'] : []), 'STATUS', 'FAILS', 'OKS', 'LAST RUN', 'RESULT'];
  return head + table([...headers, 'TOOK', 'OUTPUT'], rows);
}

/** One row per generation; wide shows the whole digest and the spec and config hashes. */
export function formatGenerations(name: string, gens: readonly GenerationView[], wide = false): string {
  if (gens.length === 0) return `${escapeControl(name)}: no generations yet\n`;
  return table(
    ['GEN', 'OUTCOME', 'IMAGE', 'DIGEST', 'CREATED', ...(wide ? ['SPEC HASH', 'CONFIG HASH'] : []), 'REASON'],
    gens.map((g) => [
      String(g.generation) + (g.from !== undefined ? ` (from ${g.from})` : ''),
      g.outcome,
      g.image,
      wide ? dash(g.imageDigest) : short(g.imageDigest, 19),
      g.createdAt,
      ...(wide ? [g.specHash, g.configHash] : []),
      dash(g.reason),
    ]),
  );
}

export function formatPlan(plan: PlanView): string {
  const changes = plan.items.filter((i) => i.action !== 'none');
  let out =
    changes.length === 0
      ? 'nothing to change\n'
      : table(
          ['CONTAINER', 'SET', 'ACTION', 'REASON'],
          changes.map((i) => [i.container, i.set, i.action, i.reason]),
        );
  for (const i of changes)
    for (const d of i.fileDiffs ?? [])
      out += `\n--- ${escapeControl(`${i.container}: ${d.file}`)}\n${escapeControl(d.diff.endsWith('\n') ? d.diff : d.diff + '\n', { keepLines: true })}`;
  if (plan.problems.length > 0)
    out += `\nproblems:\n${plan.problems.map((p) => `  ${escapeControl(p)}`).join('\n')}\n`;
  return out;
}

function clock(at: number): string {
  return new Date(at).toISOString().slice(11, 23);
}

/** One line per event, for `spcctl events` and plain progress; never more than one line. */
export function formatEvent(e: SpcdEvent): string {
  return escapeControl(eventText(e));
}

function eventText(e: SpcdEvent): string {
  const t = clock(e.at);
  switch (e.type) {
    case 'state':
      return `${t} state      ${e.container}: ${e.from} -> ${e.to}${e.reason ? ` (${e.reason})` : ''}`;
    case 'health':
      return `${t} health     ${e.container}${e.check ? `/${e.check}` : ''}: ${e.status}${e.output ? ` ${oneLine(e.output, 60)}` : ''}`;
    case 'dependency':
      return `${t} dependency ${e.container}/${e.check}: ${e.dependency} ${e.status}${e.output ? ` ${oneLine(e.output, 60)}` : ''}`;
    case 'upgrade-step':
      return `${t} step       ${e.container} gen ${e.generation}: ${e.step} ${e.outcome}${e.detail ? ` (${e.detail})` : ''}`;
    case 'pull-progress':
      return `${t} pull       ${e.image}: ${e.status}${progressText(e.current, e.total)}`;
    case 'operation':
      return `${t} operation  ${e.operationId} ${e.kind} ${e.target}: ${e.phase}${e.error ? ` ${e.error.code}: ${e.error.message}` : ''}`;
    case 'upgrade':
      return `${t} upgrade    ${e.container} (${e.kind}): ${e.outcome}${e.code ? ` ${e.code}` : ''}`;
    case 'image-refused':
      return `${t} refused    image ${e.image}: ${e.reason}`;
    case 'vm-safety-refused':
      return `${t} refused    ${e.container} ${e.action}: ${e.reason}`;
    case 'engine':
      return `${t} engine     ${e.available ? 'available' : 'UNAVAILABLE'}${e.reason ? ` (${e.reason})` : ''}`;
    case 'census':
      return `${t} census     ${e.container} after ${e.action}: ${e.outcome} (${e.detail})`;
    case 'reload':
      return `${t} reload     ${e.ok ? 'ok' : 'failed'}${e.detail ? `: ${e.detail}` : ''}`;
  }
}

export function progressText(current?: number, total?: number): string {
  if (current === undefined || total === undefined || total <= 0) return '';
  const pct = Math.min(100, Math.floor((current / total) * 100));
  return ` ${pct}% (${mb(current)}/${mb(total)})`;
}

function mb(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)}MB`;
}
