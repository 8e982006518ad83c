/**
 * The ValidatingAdmissionPolicies in deploy/kubernetes/, applied to one
 * admission request as the API server applies them (match the resource
 * rules, then the match conditions, then every validation; an error counts
 * as a refusal, failurePolicy Fail), with a CEL evaluator (@bufbuild/cel).
 * What it is not: Kubernetes' own CEL environment. The objects are untyped
 * maps (no type check against the OpenAPI schema, so an expression that
 * would not compile there can still run here), Kubernetes' extension
 * libraries are absent, and variables are evaluated eagerly. The cluster
 * (1.30 and later) is what enforces these policies; this is how a test reads them.
 */
import { isCelError, run, type CelInput } from '@bufbuild/cel';
import type {
  V1Validation,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';

export interface AdmissionRequest {
  readonly operation: 'CREATE' | 'UPDATE' | 'DELETE';
  readonly group: string;
  readonly resource: string;
  readonly subResource?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly userInfo: { readonly username: string; readonly extra?: Record<string, string[]> };
  readonly object: unknown;
  readonly oldObject: unknown;
}

/** Whether any bound policy matched, and the refusals (empty: admitted). */
export interface Verdict {
  readonly matched: string[];
  readonly refusals: string[];
}

function matches(policy: V1ValidatingAdmissionPolicy, req: AdmissionRequest): boolean {
  const resource = req.subResource ? `${req.resource}/${req.subResource}` : req.resource;
  return (policy.spec?.matchConstraints?.resourceRules ?? []).some(
    (r) =>
      (r.apiGroups ?? []).some((g) => g === '*' || g === req.group) &&
      (r.operations ?? []).some((o) => o === '*' || o === req.operation) &&
      (r.resources ?? []).some((x) => x === '*' || x === resource),
  );
}

function evaluate(expression: string, bindings: Record<string, unknown>): unknown {
  try {
    return run(expression, bindings as Record<string, CelInput>);
  } catch (err) {
    return err;
  }
}

/** A failed validation's message: its messageExpression if that yields a string, else its message, else its expression. */
function messageOf(v: V1Validation, bindings: Record<string, unknown>): string {
  const m = v.messageExpression ? evaluate(v.messageExpression, bindings) : undefined;
  return typeof m === 'string' && m !== '' ? m : (v.message ?? v.expression);
}

/** One policy on one request: undefined when it does not apply, else its refusals. */
function apply(policy: V1ValidatingAdmissionPolicy, req: AdmissionRequest): string[] | undefined {
  if (!matches(policy, req)) return undefined;
  const request = {
    operation: req.operation,
    name: req.name,
    namespace: req.namespace ?? '',
    subResource: req.subResource ?? '',
    resource: { group: req.group, version: 'v1', resource: req.resource },
    userInfo: req.userInfo,
  };
  const base = { request, object: req.object ?? null, oldObject: req.oldObject ?? null };
  for (const c of policy.spec?.matchConditions ?? []) {
    const v = evaluate(c.expression, base);
    if (v === false) return undefined;
    if (v !== true) return [`match condition ${c.name} failed: ${String(v)}`];
  }
  const variables: Record<string, unknown> = {};
  for (const v of policy.spec?.variables ?? []) {
    const value = evaluate(v.expression, { ...base, variables });
    if (!isCelError(value) && !(value instanceof Error)) variables[v.name] = value;
  }
  const refusals: string[] = [];
  for (const v of policy.spec?.validations ?? []) {
    if (evaluate(v.expression, { ...base, variables }) !== true)
      refusals.push(messageOf(v, { ...base, variables }));
  }
  return refusals;
}

/** Every policy that a Deny binding enforces, on one request. */
export function admit(
  policies: readonly V1ValidatingAdmissionPolicy[],
  bindings: readonly V1ValidatingAdmissionPolicyBinding[],
  req: AdmissionRequest,
): Verdict {
  const matched: string[] = [];
  const refusals: string[] = [];
  for (const p of policies) {
    const name = p.metadata?.name ?? '';
    const denies = bindings.some(
      (b) => b.spec?.policyName === name && (b.spec.validationActions ?? []).includes('Deny'),
    );
    const r = denies ? apply(p, req) : undefined;
    if (r === undefined) continue;
    matched.push(name);
    refusals.push(...r.map((m) => `${name}: ${m}`));
  }
  return { matched, refusals };
}
