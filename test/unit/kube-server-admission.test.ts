import type {
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestsOfKind } from '../support/kube-manifests.js';
import { FakeKubeServer } from '../support/kube-server.js';

/** The in-test API server's opt-in admission (test/support/kube-admission.ts), over plain HTTP. */
const NS = 'spcd-system';
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
const user = {
  username: 'system:serviceaccount:spcd-system:spcd',
  extra: { 'authentication.kubernetes.io/node-name': ['compute-1'] },
};
const guarded = new FakeKubeServer({
  admission: {
    policies: manifestsOfKind<V1ValidatingAdmissionPolicy>('ValidatingAdmissionPolicy'),
    bindings: manifestsOfKind<V1ValidatingAdmissionPolicyBinding>('ValidatingAdmissionPolicyBinding'),
    users: new Map([['token-compute-1', user]]),
  },
});
const open = new FakeKubeServer();

async function call(
  server: FakeKubeServer,
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
): Promise<{ code: number; body: Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { code: res.status, body: (await res.json()) as Record<string, unknown> };
}

const lease = (name: string, holder: string) => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name, namespace: NS },
  spec: { holderIdentity: holder },
});

beforeAll(async () => {
  await Promise.all([guarded.start(), open.start()]);
  for (const s of [guarded, open]) s.put('leases', NS, lease('spcd-rollout', ''));
});
afterAll(() => Promise.all([guarded.stop(), open.stop()]));

describe('in-test API server admission (opt-in)', () => {
  it('without it: any token, any write (as before)', async () => {
    expect((await call(open, 'DELETE', `${LEASES}/spcd-rollout`, 'anything')).code).toBe(200);
    expect((await call(open, 'POST', LEASES, undefined, lease('spcd-node-x', 'y'))).code).toBe(201);
  });

  it('with it: a missing or unknown token is 401; a known one reads', async () => {
    expect((await call(guarded, 'GET', LEASES, undefined)).code).toBe(401);
    expect((await call(guarded, 'GET', LEASES, 'token-compute-2')).code).toBe(401);
    expect((await call(guarded, 'GET', LEASES, 'token-compute-1')).code).toBe(200);
  });

  it('a refused CREATE or DELETE is 422 Invalid naming policy and binding, and nothing changes', async () => {
    const created = await call(guarded, 'POST', LEASES, 'token-compute-1', lease('spcd-node-compute-1', 'x'));
    expect(created.code).toBe(422);
    expect(created.body).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422 });
    expect(created.body.message).toBe(
      "ValidatingAdmissionPolicy 'spcd-own-leases' with binding 'spcd-own-leases' denied request: " +
        'the phase Lease spcd-node-compute-1 holds its own node name',
    );
    expect(guarded.get('leases', NS, 'spcd-node-compute-1')).toBeUndefined();
    const deleted = await call(guarded, 'DELETE', `${LEASES}/spcd-rollout`, 'token-compute-1');
    expect(deleted.code).toBe(422);
    expect(guarded.get('leases', NS, 'spcd-rollout')).toBeDefined();
    const own = await call(
      guarded,
      'POST',
      LEASES,
      'token-compute-1',
      lease('spcd-node-compute-1', 'compute-1'),
    );
    expect(own.code).toBe(201);
  });
});
