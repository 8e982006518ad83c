/**
 * The rollout's two stored records as text, whichever backend keeps them (a
 * Lease annotation over Kubernetes, a key over etcd): the ledger and a node's
 * phase report. A record that is absent or not one reads as undefined; the
 * runner then acts as if nothing were written (docs/explanation/fleet-upgrades.md).
 */
import type { Ledger, PhaseReport } from './decide.js';

/** A ledger from its JSON; undefined when it is not one. */
export function ledgerFromJson(text: string | undefined): Ledger | undefined {
  const v = parseObject(text) as Partial<Ledger> | undefined;
  if (!v || typeof v.rollout !== 'string' || typeof v.canaries !== 'object' || !Array.isArray(v.failed))
    return undefined;
  return { rollout: v.rollout, canaries: v.canaries ?? {}, failed: v.failed };
}

/** A phase report from its JSON; undefined when it is not one. */
export function phaseFromJson(text: string | undefined): PhaseReport | undefined {
  const v = parseObject(text) as Partial<PhaseReport> | undefined;
  return v && typeof v.node === 'string' && typeof v.phase === 'string' && typeof v.rollout === 'string'
    ? (v as PhaseReport)
    : undefined;
}

function parseObject(text: string | undefined): unknown {
  if (!text) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? v : undefined;
  } catch {
    return undefined;
  }
}
