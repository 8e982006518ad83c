import type {
  V1ClusterRole,
  V1PolicyRule,
  V1Role,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { phaseLeaseName } from '../../agent/kube/rollout-backend.js';
import { admit, type AdmissionRequest } from '../support/admission-policy.js';
import { manifestsOfKind as ofKind } from '../support/kube-manifests.js';

/**
 * Attack: the service account token in spcd's privileged pod (on every
 * hypervisor) is used from one compromised compute host to taint, cordon,
 * label or readdress other nodes, or to write another node's phase Lease
 * (a ghost in the fleet size). RBAC cannot name "the node this pod runs
 * on", so every write it grants on Nodes and Leases must be held by a
 * ValidatingAdmissionPolicy bound with Deny (deploy/kubernetes/). The
 * manifests are read as shipped; the policies' CEL is evaluated here with
 * a CEL library (test/support/admission-policy.ts), not by an API server:
 * the cluster (Kubernetes 1.30 and later) is what enforces them.
 */
const policies = ofKind<V1ValidatingAdmissionPolicy>('ValidatingAdmissionPolicy');
const bindings = ofKind<V1ValidatingAdmissionPolicyBinding>('ValidatingAdmissionPolicyBinding');

const SPCD = 'system:serviceaccount:spcd-system:spcd';
const NODE_CLAIM = 'authentication.kubernetes.io/node-name';
/** spcd's token in the pod on compute-1. */
const onCompute1 = { username: SPCD, extra: { [NODE_CLAIM]: ['compute-1'] } };

const WRITES: Record<string, AdmissionRequest['operation']> = {
  create: 'CREATE',
  update: 'UPDATE',
  patch: 'UPDATE',
  delete: 'DELETE',
  deletecollection: 'DELETE',
};

const node = (
  name: string,
  change: { labels?: object; annotations?: object; spec?: object; status?: object },
) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: {
    name,
    labels: { 'kubernetes.io/hostname': name },
    annotations: { 'node.alpha/ttl': '0' },
    ...change,
  },
  spec: change.spec ?? { podCIDR: '10.0.1.0/24' },
  status: change.status ?? {
    addresses: [{ type: 'InternalIP', address: '192.0.2.11' }],
    conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }],
  },
});

/** An UPDATE of Node `name` from its state above to the state `change` makes, by `user`. */
const nodeWrite = (
  name: string,
  change: Parameters<typeof node>[1],
  user: AdmissionRequest['userInfo'] = onCompute1,
  subResource?: string,
): AdmissionRequest => ({
  operation: 'UPDATE',
  group: '',
  resource: 'nodes',
  ...(subResource ? { subResource } : {}),
  name,
  userInfo: user,
  oldObject: node(name, {}),
  object: node(name, {
    ...change,
    ...(change.annotations ? { annotations: { 'node.alpha/ttl': '0', ...change.annotations } } : {}),
  }),
});

const leaseWrite = (name: string, holder: string, operation: AdmissionRequest['operation'] = 'UPDATE') => {
  const lease = { metadata: { name, namespace: 'spcd-system' }, spec: { holderIdentity: holder } };
  return {
    operation,
    group: 'coordination.k8s.io',
    resource: 'leases',
    name,
    namespace: 'spcd-system',
    userInfo: onCompute1,
    object: operation === 'DELETE' ? null : lease,
    oldObject: operation === 'CREATE' ? null : lease,
  } satisfies AdmissionRequest;
};

const admitted = (req: AdmissionRequest) => admit(policies, bindings, req);

describe("a node's service account token against other nodes", () => {
  it('every write RBAC grants on Nodes and Leases is held by a Deny policy on the node-name claim', () => {
    const rules = [
      ...ofKind<V1ClusterRole>('ClusterRole').flatMap((r) => r.rules ?? []),
      ...ofKind<V1Role>('Role').flatMap((r) => r.rules ?? []),
    ];
    const grants = (rule: V1PolicyRule) =>
      (rule.apiGroups ?? []).flatMap((g) =>
        (rule.resources ?? []).flatMap((res) => rule.verbs.map((v) => ({ g, res, v }))),
      );
    const all = rules.flatMap(grants);
    expect(all.filter((x) => [x.g, x.res, x.v].includes('*'))).toEqual([]);
    // on Nodes only what the NodeReporter calls: no create, delete, update, list or watch
    expect(
      all
        .filter((x) => x.res.startsWith('nodes'))
        .map((x) => `${x.res} ${x.v}`)
        .sort(),
    ).toEqual(['nodes get', 'nodes patch', 'nodes/status patch']);
    const held = all.filter((x) => ['nodes', 'nodes/status', 'leases'].includes(x.res) && WRITES[x.v]);
    expect(held.length).toBeGreaterThan(0);
    for (const { g, res, v } of held) {
      const [resource, subResource] = res.split('/');
      const req = { operation: WRITES[v]!, group: g, resource: resource!, subResource, name: 'x' };
      const by = policies.filter(
        (p) =>
          p.spec?.failurePolicy === 'Fail' &&
          (p.spec.matchConditions ?? []).some((c) => c.expression.includes(`'${SPCD}'`)) &&
          (p.spec.variables ?? []).some((x) => x.expression.includes(NODE_CLAIM)) &&
          admit([p], bindings, { ...req, userInfo: { username: SPCD }, object: {}, oldObject: {} }).matched
            .length > 0,
      );
      expect(
        by.map((p) => p.metadata?.name),
        `${g || 'core'} ${res} ${v}`,
      ).not.toEqual([]);
    }
  });

  it('cannot taint, cordon, label or readdress another node, nor its own; publishes on its own', () => {
    const taints = { spec: { podCIDR: '10.0.1.0/24', taints: [{ key: 'evict', effect: 'NoExecute' }] } };
    const refused: [string, AdmissionRequest][] = [
      ['annotate another node', nodeWrite('compute-2', { annotations: { 'spcd.openstack.org/sets': '{}' } })],
      ['taint another node', nodeWrite('compute-2', taints)],
      [
        'cordon another node',
        nodeWrite('compute-2', { spec: { podCIDR: '10.0.1.0/24', unschedulable: true } }),
      ],
      ['taint its own node', nodeWrite('compute-1', taints)],
      [
        'label its own node',
        nodeWrite('compute-1', { labels: { 'node-role.kubernetes.io/control-plane': '' } }),
      ],
      ['annotate its own node outside spcd', nodeWrite('compute-1', { annotations: { 'other.io/x': '1' } })],
      [
        'readdress another node',
        nodeWrite(
          'compute-2',
          { status: { addresses: [{ type: 'InternalIP', address: '198.51.100.66' }] } },
          onCompute1,
          'status',
        ),
      ],
      [
        "rewrite another node's Ready",
        nodeWrite(
          'compute-2',
          {
            status: {
              addresses: [{ type: 'InternalIP', address: '192.0.2.11' }],
              conditions: [{ type: 'Ready', status: 'False', reason: 'x' }],
            },
          },
          onCompute1,
          'status',
        ),
      ],
      [
        'write with a token that names no node',
        nodeWrite('compute-1', { annotations: { 'spcd.openstack.org/sets': '{}' } }, { username: SPCD }),
      ],
    ];
    for (const [what, req] of refused) expect(admitted(req).refusals, what).not.toEqual([]);
    // what NodeReporter does on its own node is admitted
    const sets = nodeWrite('compute-1', {
      annotations: { 'spcd.openstack.org/sets': '{"nova/compute":{}}' },
    });
    expect(admitted(sets)).toEqual({ matched: ['spcd-own-node'], refusals: [] });
    const healthy = nodeWrite(
      'compute-1',
      {
        status: {
          addresses: [{ type: 'InternalIP', address: '192.0.2.11' }],
          conditions: [
            { type: 'Ready', status: 'True', reason: 'KubeletReady' },
            { type: 'SpcdComputeHealthy', status: 'True', reason: 'AllSetsHealthy' },
          ],
        },
      },
      onCompute1,
      'status',
    );
    expect(admitted(healthy)).toEqual({ matched: ['spcd-own-node'], refusals: [] });
    // the policies are for spcd's account only: a kubelet or an operator is not matched
    expect(admitted(nodeWrite('compute-2', taints, { username: 'system:node:compute-2' })).matched).toEqual(
      [],
    );
  });

  it("cannot write another node's phase Lease, nor any Lease that is not spcd's", () => {
    const refused: [string, AdmissionRequest][] = [
      ["another node's phase Lease", leaseWrite(phaseLeaseName('compute-2'), 'compute-2')],
      ["a ghost node's phase Lease", leaseWrite(phaseLeaseName('ghost-1'), 'ghost-1', 'CREATE')],
      ['its own phase Lease holding another name', leaseWrite(phaseLeaseName('compute-1'), 'ghost-1')],
      ["another component's lock", leaseWrite('kube-scheduler', 'compute-1')],
      ['a slot-like name', leaseWrite('spcd-upgrade-slot-0-evil', 'compute-1')],
      ['deleting the ledger', leaseWrite('spcd-rollout', '', 'DELETE')],
    ];
    for (const [what, req] of refused) expect(admitted(req).refusals, what).not.toEqual([]);
    for (const ok of [
      leaseWrite(phaseLeaseName('compute-1'), 'compute-1', 'CREATE'),
      leaseWrite(phaseLeaseName('compute-1'), 'compute-1'),
      leaseWrite('spcd-upgrade-slot-0', 'compute-2'), // a hand-over names the next holder
      leaseWrite('spcd-rollout', ''),
    ])
      expect(admitted(ok), ok.name).toEqual({ matched: ['spcd-own-leases'], refusals: [] });
  });
});
