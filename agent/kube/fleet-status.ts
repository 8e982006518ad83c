/**
 * What `spcctl fleet status` reads, through the Kubernetes API with the
 * operator's kubeconfig (from any node or workstation, not the local socket):
 * the desired ConfigMap and its rollout object, the ledger Lease, every
 * node's phase Lease and the slot Leases.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { isSpcdError } from '../errors.js';
import { summarize, type PhaseReport, type RolloutSummary } from '../rollout/decide.js';
import { targetId } from '../rollout/runner.js';
import { parseRollout, type RolloutSpec } from '../rollout/spec.js';
import { windowState } from '../rollout/windows.js';
import { KubeClient } from './client.js';
import { parseDesired } from './desired-watcher.js';
import { SLOT_LABEL } from './fleet-slots.js';
import { fromMicroTime } from './lease-time.js';
import { LEDGER_LEASE, PHASE_LABEL, ledgerFrom, phaseFrom } from './rollout-backend.js';
import { ledgerFor } from '../rollout/decide.js';

export interface FleetStatus {
  readonly namespace: string;
  readonly configMap: string;
  /** False when the ConfigMap does not exist: nothing is being rolled out. */
  readonly desired: boolean;
  readonly rollout?: {
    readonly id: string;
    /** Undefined: each node's --fleet-slots. */
    readonly maxConcurrent?: number;
    readonly canary?: RolloutSpec['canary'];
    readonly failureBudget?: RolloutSpec['failureBudget'];
    readonly paused: boolean;
    readonly windows: { readonly count: number; readonly open: boolean; readonly opensAt?: number };
  };
  readonly summary?: RolloutSummary;
  readonly nodes: readonly PhaseReport[];
  readonly slots: readonly {
    readonly name: string;
    readonly holder: string | null;
    readonly renewedAt: number | null;
  }[];
  readonly at: number;
}

export async function readFleetStatus(opts: {
  readonly kubeconfig?: string;
  readonly namespace?: string;
  readonly configMap: string;
  readonly now: number;
}): Promise<FleetStatus> {
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else kc.loadFromDefault();
  const namespace = opts.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'spcd-system';
  const api = new KubeClient(kc);
  try {
    const [cms, ledgerLease, phaseList, slotList] = await Promise.all([
      api.listConfigMaps(namespace, `metadata.name=${opts.configMap}`),
      api.readLease(namespace, LEDGER_LEASE).catch((err: unknown) => {
        if (isSpcdError(err, 'NOT_FOUND')) return undefined;
        throw err;
      }),
      api.listLeases(namespace, `${PHASE_LABEL}=true`),
      api.listLeases(namespace, `${SLOT_LABEL}=true`),
    ]);
    const nodes = phaseList.items
      .map(phaseFrom)
      .filter((p): p is PhaseReport => p !== undefined)
      .sort((a, b) => a.node.localeCompare(b.node, 'en', { numeric: true }));
    const slots = slotList.items
      .map((l) => ({
        name: l.metadata?.name ?? '',
        holder: l.spec?.holderIdentity || null,
        renewedAt: fromMicroTime(l.spec?.renewTime) ?? null,
      }))
      .sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
    const base = { namespace, configMap: opts.configMap, nodes, slots, at: opts.now };
    const cm = cms.items.find((c) => c.metadata?.name === opts.configMap);
    if (!cm) return { ...base, desired: false };
    const d = parseDesired(cm); // throws SPEC_INVALID / SPEC_YAML naming the key
    const spec = parseRollout(d.rollout, { maxConcurrent: 1, id: targetId(d) });
    const w = windowState(spec.windows, opts.now);
    return {
      ...base,
      desired: true,
      rollout: {
        id: spec.id,
        ...(d.rollout?.maxConcurrent !== undefined ? { maxConcurrent: spec.maxConcurrent } : {}),
        ...(spec.canary ? { canary: spec.canary } : {}),
        ...(spec.failureBudget ? { failureBudget: spec.failureBudget } : {}),
        paused: spec.paused,
        windows: { count: spec.windows.length, ...w },
      },
      summary: summarize(spec, ledgerFor(spec.id, ledgerFrom(ledgerLease)), nodes),
    };
  } finally {
    api.close();
  }
}
