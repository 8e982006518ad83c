import type {
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../agent/kube/client.js';
import { CONDITION_TYPE, NodeReporter, SETS_ANNOTATION } from '../../agent/kube/node-reporter.js';
import { KubeRolloutBackend, PHASE_ANNOTATION, phaseLeaseName } from '../../agent/kube/rollout-backend.js';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { FakeClock } from '../support/fake-clock.js';
import type { AdmissionUser } from '../support/kube-admission.js';
import { manifestsOfKind } from '../support/kube-manifests.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { clone, type Obj } from '../support/kube-store.js';

/**
 * Attack: root on compute-1 takes spcd's service account token from its pod
 * and, through spcd's own client, writes compute-2's Node (annotation, label,
 * taint, condition), compute-2's phase Lease, or a Lease that is not spcd's.
 * The in-test API server applies the admission policies shipped in
 * deploy/kubernetes/ to every write, with the CEL evaluator of
 * kube-rbac.test.ts (test/support/kube-admission.ts), and authenticates each
 * node's token as a bound token does: spcd's service account with the
 * node-name claim. Each refusal is a 422 naming the policy, and nothing is
 * stored. Not Kubernetes' CEL environment: the cluster is what enforces them.
 */
const NS = 'spcd-system';
const SPCD = 'system:serviceaccount:spcd-system:spcd';
const onNode = (node: string): AdmissionUser => ({
  username: SPCD,
  extra: { 'authentication.kubernetes.io/node-name': [node] },
});
const server = new FakeKubeServer({
  admission: {
    policies: manifestsOfKind<V1ValidatingAdmissionPolicy>('ValidatingAdmissionPolicy'),
    bindings: manifestsOfKind<V1ValidatingAdmissionPolicyBinding>('ValidatingAdmissionPolicyBinding'),
    users: new Map([
      ['token-compute-1', onNode('compute-1')],
      ['token-compute-2', onNode('compute-2')],
    ]),
  },
});
const log = silentLogger();
/** spcd's client with compute-1's token. */
let api: KubeClient;

const node = (name: string, address: string): Obj => ({
  metadata: {
    name,
    labels: { 'kubernetes.io/hostname': name },
    annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
  },
  spec: { podCIDR: '10.0.1.0/24' },
  status: {
    addresses: [{ type: 'InternalIP', address }],
    conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }],
  },
});
const lease = (name: string, holder: string): Obj => ({
  metadata: { name, namespace: NS },
  spec: { holderIdentity: holder, leaseDurationSeconds: 30 },
});

beforeAll(async () => {
  await server.start();
  api = new KubeClient(server.kubeConfig(NS, 'token-compute-1').kc, { callTimeoutMs: 15_000 });
  server.put('nodes', null, node('compute-1', '192.0.2.11'));
  server.put('nodes', null, node('compute-2', '192.0.2.12'));
  server.put('leases', NS, lease(phaseLeaseName('compute-2'), 'compute-2'));
  server.put('leases', NS, lease('other-controller-lock', 'other-controller'));
});
afterAll(async () => {
  api.close();
  await server.stop();
});

const report = (node: string): PhaseReport => ({ node, rollout: 'r1', phase: 'upgrading', since: 1 });
const backendOf = (node: string): KubeRolloutBackend =>
  new KubeRolloutBackend({
    api,
    namespace: NS,
    node,
    configMap: 'spcd-desired',
    leaseDurationSeconds: 30,
    clock: new FakeClock(),
    log,
  });

/** `attack` fails with the API server's 422 from `policy`, and the object at `resource/name` is as it was. */
async function refused(
  resource: 'nodes' | 'leases',
  name: string,
  policy: string,
  attack: () => Promise<unknown>,
): Promise<void> {
  const namespace = resource === 'leases' ? NS : null;
  const before = clone(server.get(resource, namespace, name));
  const err = await attack().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SpcdError);
  expect((err as SpcdError).code).toBe('KUBE_REJECTED');
  expect((err as SpcdError).details.status).toBe(422);
  const body = JSON.stringify(((err as SpcdError).cause as { body?: unknown }).body);
  expect(body).toContain(`ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request:`);
  expect(server.calls.at(-1)?.status).toBe(422);
  expect(server.get(resource, namespace, name)).toEqual(before);
}

describe("compute-1's service account token, through spcd's client, against compute-2's objects", () => {
  it('compute-1 publishes its own Node annotation and condition and writes its own phase Lease (admitted)', async () => {
    const reporter = new NodeReporter({ api, nodeName: 'compute-1', clock: new FakeClock(), log });
    reporter.report({ engineAvailable: true, sets: [] });
    await reporter.flush();
    expect(reporter.patches).toBe(2);
    const own = server.get('nodes', null, 'compute-1')!;
    expect((own.metadata.annotations as Record<string, string>)[SETS_ANNOTATION]).toBeDefined();
    const conditions = (own.status as { conditions: { type: string }[] }).conditions;
    expect(conditions.map((c) => c.type)).toEqual(['Ready', CONDITION_TYPE]);
    await backendOf('compute-1').writePhase(report('compute-1'));
    const phase = server.get('leases', NS, phaseLeaseName('compute-1'))!;
    expect(JSON.parse((phase.metadata.annotations as Record<string, string>)[PHASE_ANNOTATION]!)).toEqual(
      report('compute-1'),
    );
    expect(server.calls.filter((c) => c.status === 422)).toEqual([]);
  });

  it("is refused annotating compute-2's Node", () =>
    refused('nodes', 'compute-2', 'spcd-own-node', () =>
      api.patchNode('compute-2', { metadata: { annotations: { [SETS_ANNOTATION]: '{}' } } }),
    ));

  it("is refused labelling compute-2's Node", () =>
    refused('nodes', 'compute-2', 'spcd-own-node', () =>
      api.patchNode('compute-2', { metadata: { labels: { 'node-role.kubernetes.io/control-plane': '' } } }),
    ));

  it("is refused tainting compute-2's Node", () =>
    refused('nodes', 'compute-2', 'spcd-own-node', () =>
      api.patchNode('compute-2', { spec: { taints: [{ key: 'evict', effect: 'NoExecute' }] } }),
    ));

  it("is refused setting compute-2's SpcdComputeHealthy condition (nodes/status)", () =>
    refused('nodes', 'compute-2', 'spcd-own-node', () =>
      api.patchNodeStatus('compute-2', {
        status: { conditions: [{ type: CONDITION_TYPE, status: 'False', reason: 'Forged' }] },
      }),
    ));

  it("is refused writing compute-2's phase Lease (spcd's own backend)", () =>
    refused('leases', phaseLeaseName('compute-2'), 'spcd-own-leases', () =>
      backendOf('compute-2').writePhase(report('compute-2')),
    ));

  it('is refused on a Lease that is neither a slot, the ledger nor its own phase Lease', () =>
    refused('leases', 'other-controller-lock', 'spcd-own-leases', () =>
      api.patchLease(NS, 'other-controller-lock', { spec: { holderIdentity: 'compute-1' } }),
    ));
});
