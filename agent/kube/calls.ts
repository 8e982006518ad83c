/**
 * The single table of Kubernetes API calls spcd makes. KubeClient (client.ts)
 * implements exactly these names (the compiler checks it), and a unit test
 * compares this table with the Role/ClusterRole in deploy/kubernetes/ so the
 * RBAC grants exactly what the code calls: no more, no less.
 */

export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch';

export interface KubeCall {
  readonly verb: KubeVerb;
  /** API group; '' is the core group. */
  readonly group: '' | 'coordination.k8s.io';
  /** Resource, with its subresource after a slash (nodes/status). */
  readonly resource: string;
  /** cluster: granted by the ClusterRole; namespace: by the Role in spcd's namespace. */
  readonly scope: 'cluster' | 'namespace';
  /** Who calls it, for the docs and reviewers. */
  readonly why: string;
}

export const KUBE_CALLS = {
  readNode: {
    verb: 'get',
    group: '',
    resource: 'nodes',
    scope: 'cluster',
    why: 'NodeReporter seeds its last-published annotation after a restart',
  },
  patchNode: {
    verb: 'patch',
    group: '',
    resource: 'nodes',
    scope: 'cluster',
    why: 'NodeReporter: spcd.openstack.org/* annotations of its own Node (merge patch; policy spcd-own-node)',
  },
  patchNodeStatus: {
    verb: 'patch',
    group: '',
    resource: 'nodes/status',
    scope: 'cluster',
    why: 'NodeReporter: the SpcdComputeHealthy condition of its own Node (strategic merge on type; policy spcd-own-node)',
  },
  createEvent: {
    verb: 'create',
    group: '',
    resource: 'events',
    scope: 'namespace',
    why: 'EventRecorder: upgrades, rollbacks, unhealthy restarts, refusals',
  },
  patchEvent: {
    verb: 'patch',
    group: '',
    resource: 'events',
    scope: 'namespace',
    why: 'EventRecorder: count++ on a repeated identical event',
  },
  readLease: {
    verb: 'get',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: "FleetSlots: read a slot before renewing it; rollouts: read the ledger and this node's phase",
  },
  createLease: {
    verb: 'create',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: "FleetSlots: the first node to need a slot creates it; the first ledger write, a node's phase Lease",
  },
  replaceLease: {
    verb: 'update',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: "take / renew / release a slot, write the ledger, guarded by resourceVersion; a node's phase",
  },
  patchLease: {
    verb: 'patch',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: 'FleetSlots: a waiter joins or leaves a slot queue (its own annotation key: no conflict with other waiters)',
  },
  listLeases: {
    verb: 'list',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: "FleetSlots: one pass over the slots, the version a wait watches from; the nodes' phases",
  },
  watchLeases: {
    verb: 'watch',
    group: 'coordination.k8s.io',
    resource: 'leases',
    scope: 'namespace',
    why: 'FleetSlots: a node waiting for a slot wakes when one is released or expires',
  },
  listConfigMaps: {
    verb: 'list',
    group: '',
    resource: 'configmaps',
    scope: 'namespace',
    why: 'DesiredWatcher: initial read and re-list after 410 Gone',
  },
  watchConfigMaps: {
    verb: 'watch',
    group: '',
    resource: 'configmaps',
    scope: 'namespace',
    why: 'DesiredWatcher: follow changes from the listed resourceVersion',
  },
} as const satisfies Record<string, KubeCall>;

export type KubeCallName = keyof typeof KUBE_CALLS;
