/**
 * The rollout object: how a fleet takes the desired document's target
 * (images and globals). Parsed from the document's `rollout` part (the
 * ConfigMap key, or the field of the etcd key), every problem named by where
 * it came from and its field: `ConfigMap spcd-system/spcd-desired key
 * "rollout": rollout.canary.nodes must be …`. Pure.
 */
import { SpcdError } from '../errors.js';
import { parseDuration } from '../model/units.js';
import { parseWindow, type Window } from './windows.js';

export interface RolloutSpec {
  /** Names this rollout: phases and the ledger belong to one id. Default: a hash of the target. */
  readonly id: string;
  /** N: nodes upgrading at once. */
  readonly maxConcurrent: number;
  /** The first `nodes` nodes upgrade alone, then soak `soakMs` with their health watched. */
  readonly canary?: { readonly nodes: number; readonly soakMs: number };
  /** Stop the whole fleet after `maxFailed` failed or rolled-back nodes, or `maxFailedPercent` of the nodes seen. */
  readonly failureBudget?: { readonly maxFailed?: number; readonly maxFailedPercent?: number };
  readonly paused: boolean;
  /** Nodes start only while one of these is open; none = always. */
  readonly windows: readonly Window[];
}

const FIELDS = ['id', 'maxConcurrent', 'canary', 'failureBudget', 'paused', 'windows'];
const ID = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;

/** `source` names where the value came from (the desired document's backend). */
function invalid(source: string, field: string, message: string): SpcdError {
  return new SpcdError('SPEC_INVALID', `${source}: ${field} ${message}`, {
    key: 'rollout',
    field,
    source,
  });
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKnown(
  source: string,
  v: Record<string, unknown>,
  field: string,
  known: readonly string[],
): void {
  for (const k of Object.keys(v))
    if (!known.includes(k))
      throw invalid(source, `${field}.${k}`, `is not a field (known: ${known.join(', ')})`);
}

function positiveInt(source: string, v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw invalid(source, field, `must be a whole number >= 1, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Validates a parsed `rollout` value. `defaults.maxConcurrent` is the node's
 * --fleet-slots; `defaults.id` the target's hash. Throws SPEC_INVALID naming
 * the field after `source`, where the value came from (DesiredDocument.source:
 * `ConfigMap spcd-system/spcd-desired key "rollout"`, `etcd key /spcd/desired, field rollout`).
 */
export function parseRollout(
  raw: unknown,
  defaults: { readonly maxConcurrent: number; readonly id: string },
  source: string,
): RolloutSpec {
  if (raw === undefined || raw === null)
    return { id: defaults.id, maxConcurrent: defaults.maxConcurrent, paused: false, windows: [] };
  if (!isMap(raw)) throw invalid(source, 'rollout', 'must be a map');
  onlyKnown(source, raw, 'rollout', FIELDS);
  let id = defaults.id;
  if (raw.id !== undefined) {
    if (typeof raw.id !== 'string' || !ID.test(raw.id))
      throw invalid(source, 'rollout.id', 'must be 1-63 of a-z 0-9 . _ - (starting and ending alphanumeric)');
    id = raw.id;
  }
  const maxConcurrent =
    raw.maxConcurrent === undefined
      ? defaults.maxConcurrent
      : positiveInt(source, raw.maxConcurrent, 'rollout.maxConcurrent');
  let canary: RolloutSpec['canary'];
  if (raw.canary !== undefined) {
    if (!isMap(raw.canary)) throw invalid(source, 'rollout.canary', 'must be a map with nodes and soak');
    onlyKnown(source, raw.canary, 'rollout.canary', ['nodes', 'soak']);
    const nodes = positiveInt(source, raw.canary.nodes, 'rollout.canary.nodes');
    const soakMs = raw.canary.soak === undefined ? 0 : parseDuration(raw.canary.soak);
    if (soakMs === undefined)
      throw invalid(
        source,
        'rollout.canary.soak',
        `must be a duration like 10m, got ${JSON.stringify(raw.canary.soak)}`,
      );
    canary = { nodes, soakMs };
  }
  let failureBudget: RolloutSpec['failureBudget'];
  if (raw.failureBudget !== undefined) {
    const b = raw.failureBudget;
    if (!isMap(b))
      throw invalid(source, 'rollout.failureBudget', 'must be a map with maxFailed and/or maxFailedPercent');
    onlyKnown(source, b, 'rollout.failureBudget', ['maxFailed', 'maxFailedPercent']);
    if (b.maxFailed === undefined && b.maxFailedPercent === undefined)
      throw invalid(source, 'rollout.failureBudget', 'must set maxFailed or maxFailedPercent');
    const maxFailed =
      b.maxFailed === undefined
        ? undefined
        : positiveInt(source, b.maxFailed, 'rollout.failureBudget.maxFailed');
    const pct = b.maxFailedPercent;
    if (pct !== undefined && (typeof pct !== 'number' || !(pct > 0 && pct <= 100)))
      throw invalid(
        source,
        'rollout.failureBudget.maxFailedPercent',
        `must be a number in (0, 100], got ${JSON.stringify(pct)}`,
      );
    failureBudget = {
      ...(maxFailed !== undefined ? { maxFailed } : {}),
      ...(pct !== undefined ? { maxFailedPercent: pct } : {}),
    };
  }
  if (raw.paused !== undefined && typeof raw.paused !== 'boolean')
    throw invalid(source, 'rollout.paused', `must be true or false, got ${JSON.stringify(raw.paused)}`);
  let windows: Window[] = [];
  if (raw.windows !== undefined) {
    if (!Array.isArray(raw.windows)) throw invalid(source, 'rollout.windows', 'must be a list');
    windows = raw.windows.map((w, i) => {
      try {
        return parseWindow(w);
      } catch (err) {
        const e = err as { field?: string; message: string };
        throw invalid(source, `rollout.windows[${i}]${e.field ? `.${e.field}` : ''}`, e.message);
      }
    });
  }
  return {
    id,
    maxConcurrent,
    ...(canary ? { canary } : {}),
    ...(failureBudget ? { failureBudget } : {}),
    paused: raw.paused === true,
    windows,
  };
}
