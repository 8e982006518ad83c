/** The fleet part of the daemon's settings: Kubernetes, etcd, or neither (never both). */
import { hostname } from 'node:os';
import { SpcdError } from '../errors.js';
import { parseEtcdSettings } from '../etcd/settings.js';
import { boolFlagValue } from '../model/flags.js';
import type { FlagReader, KubeSettings, Settings } from './settings.js';

/** How this node takes part in a fleet: through Kubernetes, through etcd, or not at all (never both). */
export function fleetOf(
  { get, path }: Pick<FlagReader, 'get' | 'path'>,
  env: NodeJS.ProcessEnv,
): Pick<Settings, 'etcd' | 'kube' | 'kubeconfig' | 'nodeName'> {
  const kubeconfig = path('kubeconfig', false);
  const nodeName = get('node-name');
  const slots = Number(get('fleet-slots'));
  if (!Number.isInteger(slots) || slots < 1 || slots > 1000) {
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--fleet-slots: '${get('fleet-slots')}' must be an integer from 1 to 1000`,
      {
        flag: 'fleet-slots',
      },
    );
  }
  const inCluster = env.KUBERNETES_SERVICE_HOST !== undefined && nodeName !== undefined;
  if (kubeconfig && !nodeName) {
    throw new SpcdError('SETTINGS_INVALID', '--kubeconfig needs --node-name (or NODE_NAME)', {
      flag: 'node-name',
    });
  }
  const etcd = parseEtcdSettings(get, slots);
  const fleetNode = nodeName ?? (etcd ? hostname() : undefined);
  // over etcd a node's keys are named after it, and its etcd role is granted them by name (docs/explanation/fleet-over-etcd.md)
  if (etcd && fleetNode !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/.test(fleetNode))
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--node-name: '${fleetNode}' must be 1 to 253 of A-Z a-z 0-9 . _ - (it names this node's etcd keys)`,
      { flag: 'node-name', value: fleetNode },
    );
  if (etcd && (kubeconfig || inCluster)) {
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--etcd-endpoints cannot be used with ${kubeconfig ? '--kubeconfig' : 'in-cluster Kubernetes (KUBERNETES_SERVICE_HOST and NODE_NAME)'}: a fleet coordinates through one of them`,
      { flag: 'etcd-endpoints' },
    );
  }
  const kube = kubeconfig || inCluster ? kubeOf(get, slots) : undefined;
  if (!kube && boolFlagValue(get('kube-insecure')) !== false)
    throw new SpcdError(
      'SETTINGS_INVALID',
      '--kube-insecure is set but neither --kubeconfig nor in-cluster Kubernetes is',
      {
        flag: 'kube-insecure',
      },
    );
  return { etcd, kube, kubeconfig, nodeName: fleetNode };
}

function kubeOf(get: FlagReader['get'], fleetSlots: number): KubeSettings {
  const insecure = boolFlagValue(get('kube-insecure'));
  if (insecure === undefined)
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--kube-insecure: '${get('kube-insecure')}' is not true or false`,
      {
        flag: 'kube-insecure',
        value: get('kube-insecure'),
      },
    );
  return {
    namespace: get('kube-namespace') ?? 'spcd-system',
    desiredConfigMap: get('kube-desired-configmap'),
    fleetSlots,
    insecure,
  };
}
