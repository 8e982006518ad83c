/**
 * What `spcctl fleet status` reads, through the Kubernetes API with the
 * operator's kubeconfig (from any node or workstation, not the local socket):
 * the desired ConfigMap and its rollout object, the ledger Lease, every
 * node's phase Lease and the slot Leases.
 */
import { isSpcdError } from '../errors.js';
import { fleetView, type FleetStatus } from '../rollout/fleet-view.js';
import { KubeClient } from './client.js';
import { assertTrustedKubeconfig, checkKubeTransport, loadKubeConfig } from './kubeconfig.js';
import { parseDesired } from './desired-watcher.js';
import { SLOT_LABEL } from './fleet-slots.js';
import { fromMicroTime } from './lease-time.js';
import { LEDGER_LEASE, PHASE_LABEL, fleetPhases, ledgerFrom } from './rollout-backend.js';

export type { FleetStatus } from '../rollout/fleet-view.js';

/**
 * The fleet as the records say, read with the kubeconfig `kubeconfig`, else
 * as kubectl finds one in `env` (loadKubeConfig). A cluster reached over
 * http:// or without checking its certificate is refused before anything is
 * sent (KUBECONFIG_INSECURE), unless `insecure`, and then `warn` is told once.
 */
export async function readFleetStatus(opts: {
  readonly kubeconfig?: string;
  readonly namespace?: string;
  readonly configMap: string;
  readonly now: number;
  readonly env?: NodeJS.ProcessEnv;
  readonly insecure?: boolean;
  readonly warn?: (line: string) => void;
}): Promise<FleetStatus> {
  const loaded = loadKubeConfig(opts.kubeconfig, opts.env ?? process.env);
  await assertTrustedKubeconfig(loaded, 'spcctl');
  const warning = checkKubeTransport(loaded, opts.insecure === true, 'spcctl');
  if (warning) opts.warn?.(`warning: ${warning}`);
  const kc = loaded.kc;
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
    const cm = cms.items.find((c) => c.metadata?.name === opts.configMap);
    const view = fleetView(
      {
        desired: cm ? parseDesired(cm) : undefined, // throws SPEC_INVALID / SPEC_YAML naming the key
        ledger: ledgerFrom(ledgerLease),
        phases: fleetPhases(phaseList.items), // as the nodes count them
        slots: slotList.items.map((l) => ({
          name: l.metadata?.name ?? '',
          holder: l.spec?.holderIdentity || null,
          renewedAt: fromMicroTime(l.spec?.renewTime) ?? null,
        })),
      },
      opts.now,
    );
    return { backend: 'kubernetes', namespace, configMap: opts.configMap, ...view };
  } finally {
    api.close();
  }
}
