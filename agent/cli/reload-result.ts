/**
 * What `spcctl reload --wait` prints once the reload succeeded: its result
 * (the OpenAPI document's ReloadResult) in a few lines. The result comes from
 * the daemon as JSON: its shape is checked here, and one that does not match
 * is said in one line, never thrown.
 */
import { escapeControl } from '../model/text.js';

interface Caused {
  readonly operationId: string;
  readonly kind: string;
  readonly container: string;
  readonly outcome: string;
}

interface ReloadSummary {
  readonly containers: number;
  readonly changes: readonly { readonly kind: string }[];
  readonly quarantined: readonly string[];
  readonly operations: readonly Caused[];
}

export const UNREADABLE_RELOAD_RESULT = 'reload: succeeded, but its result could not be read';

/** The lines to print for a reload's result, each one line of safe text. */
export function reloadResultLines(result: unknown): string[] {
  const r = readSummary(result);
  if (!r) return [UNREADABLE_RELOAD_RESULT];
  const lines = [`reload: ${count(r.containers, 'container')} defined; ${changesText(r.changes)}`];
  if (r.quarantined.length > 0) lines.push(`still quarantined: ${r.quarantined.join(', ')}`);
  if (r.operations.length === 0) lines.push('operations caused by the reload: none');
  else {
    lines.push('operations caused by the reload:');
    for (const o of r.operations)
      lines.push(`  ${o.kind} ${o.container}: ${o.outcome} (operation ${o.operationId})`);
  }
  return lines.map((l) => escapeControl(l));
}

/** `1 change planned (recover 1)`, the kinds in the order they first come. */
function changesText(changes: ReloadSummary['changes']): string {
  if (changes.length === 0) return 'no changes planned';
  const byKind = new Map<string, number>();
  for (const c of changes) byKind.set(c.kind, (byKind.get(c.kind) ?? 0) + 1);
  const kinds = [...byKind].map(([kind, n]) => `${kind} ${n}`).join(', ');
  return `${count(changes.length, 'change')} planned (${kinds})`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function readSummary(v: unknown): ReloadSummary | undefined {
  if (!isRecord(v)) return undefined;
  const { containers, changes, quarantined = [], operations } = v;
  if (typeof containers !== 'number' || !Number.isInteger(containers) || containers < 0) return undefined;
  if (!Array.isArray(changes) || !changes.every((c) => isRecord(c) && typeof c.kind === 'string'))
    return undefined;
  if (!Array.isArray(quarantined) || !quarantined.every((q) => typeof q === 'string')) return undefined;
  if (!Array.isArray(operations) || !operations.every(isCaused)) return undefined;
  return {
    containers,
    changes: changes as { kind: string }[],
    quarantined: quarantined as string[],
    operations,
  };
}

function isCaused(v: unknown): v is Caused {
  return (
    isRecord(v) &&
    typeof v.operationId === 'string' &&
    typeof v.kind === 'string' &&
    typeof v.container === 'string' &&
    typeof v.outcome === 'string'
  );
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
