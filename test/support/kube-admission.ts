/**
 * Authentication and admission for the in-test API server (kube-server.ts),
 * opt-in: several bearer tokens, each standing for one user (a service
 * account with the node-name claim a bound token carries), and every write
 * put to the ValidatingAdmissionPolicies through test/support/admission-policy.ts,
 * as an AdmissionRequest built the way kube-apiserver builds it (for a patch,
 * oldObject is the stored object and object the patched result). A refusal
 * is answered as kube-apiserver answers it: 422 with a Status, reason Invalid.
 * This is the same CEL evaluator kube-rbac.test.ts uses, not Kubernetes' CEL
 * environment: the cluster is what enforces the policies.
 */
import type {
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { admit, type AdmissionRequest } from './admission-policy.js';
import { status } from './kube-store.js';

export type AdmissionUser = AdmissionRequest['userInfo'];

export interface AdmissionOptions {
  readonly policies: readonly V1ValidatingAdmissionPolicy[];
  readonly bindings: readonly V1ValidatingAdmissionPolicyBinding[];
  /** Bearer token → the user it authenticates as. Any other token is 401. */
  readonly users: ReadonlyMap<string, AdmissionUser>;
}

/** One write as the server sees it, before anything is stored. */
export interface Write {
  readonly verb: string; // create update patch delete
  readonly group: string;
  readonly resource: string; // without the subresource
  readonly subResource?: string;
  readonly namespace: string | null;
  readonly name: string;
  readonly object: unknown;
  readonly oldObject: unknown;
}

const OPERATIONS: Record<string, AdmissionRequest['operation']> = {
  create: 'CREATE',
  update: 'UPDATE',
  patch: 'UPDATE',
  delete: 'DELETE',
};

/** The user a request's `Authorization: Bearer <token>` names, or undefined (401). */
export function authenticate(
  opts: AdmissionOptions,
  authorization: string | undefined,
): AdmissionUser | undefined {
  const m = /^Bearer (\S+)$/.exec(authorization ?? '');
  return m ? opts.users.get(m[1]!) : undefined;
}

/** The 401 Status kube-apiserver answers a token it does not know with. */
export function unauthorized(): Record<string, unknown> {
  return status(401, 'Unauthorized', 'Unauthorized');
}

/** The 422 Status that refuses `write` by `user`, or undefined when the policies admit it. */
export function refusal(
  opts: AdmissionOptions,
  user: AdmissionUser,
  write: Write,
): Record<string, unknown> | undefined {
  const operation = OPERATIONS[write.verb];
  if (!operation) return undefined;
  const req: AdmissionRequest = {
    operation,
    group: write.group,
    resource: write.resource,
    ...(write.subResource ? { subResource: write.subResource } : {}),
    name: write.name,
    ...(write.namespace !== null ? { namespace: write.namespace } : {}),
    userInfo: user,
    object: operation === 'DELETE' ? null : write.object,
    oldObject: operation === 'CREATE' ? null : write.oldObject,
  };
  const first = admit(opts.policies, opts.bindings, req).refusals[0];
  if (first === undefined) return undefined;
  // admit() prefixes each refusal with its policy's name
  const cut = first.indexOf(': ');
  const policy = first.slice(0, cut);
  const binding = opts.bindings.find(
    (b) => b.spec?.policyName === policy && (b.spec.validationActions ?? []).includes('Deny'),
  )?.metadata?.name;
  const message = `ValidatingAdmissionPolicy '${policy}' with binding '${binding ?? policy}' denied request: ${first.slice(cut + 2)}`;
  return status(422, 'Invalid', message);
}
