/**
 * The write routes: each long operation answers 202 with its OperationRef at
 * once. Each body is checked against the schema its doc shows (openapi/check.ts).
 */
import type { ErrorCode } from '../../errors.js';
import { readJsonBody } from '../body.js';
import { json, type Route, type RouteContext, type RouteResult } from '../context.js';
import { checkBody } from '../openapi/check.js';
import type { RouteDoc } from '../openapi/document.js';
import { bool, int, nullable, obj, ref, type Schema } from '../openapi/schema.js';
import type { OperationRef } from '../types.js';
import { CONTAINER_PARAM, SET_PARAM } from './reads.js';

const IMAGE_REF: Schema = {
  type: 'string',
  title: 'image reference',
  minLength: 1,
  maxLength: 512,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._\\-/:@+]*$',
};
const expectedGeneration = nullable(
  int(0, 'refuse (409 GENERATION_MISMATCH) unless the container is at this generation'),
);

/** Refusals an operation answers instead of a 202 (docs/reference/api.md). */
const REFUSALS: readonly ErrorCode[] = [
  'CONFLICT',
  'SHUTTING_DOWN',
  'RECOVERY_QUARANTINED',
  'ENGINE_UNAVAILABLE',
];

function operationDoc(summary: string, body: Schema, errors: readonly ErrorCode[], params = {}): RouteDoc {
  return {
    summary,
    params,
    body,
    responses: [
      { status: 202, description: 'accepted; follow it on GET /v1/events', schema: ref('OperationRef') },
    ],
    errors: [...REFUSALS, ...errors],
  };
}

/** The body, checked against the route's schema; a field sent as null is absent. */
async function body<T>(ctx: RouteContext, schema: Schema): Promise<T> {
  const raw = await readJsonBody(ctx.req, ctx.limits);
  checkBody(schema, raw);
  return Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== null)) as T;
}

function accepted(ctx: RouteContext, ref: OperationRef): RouteResult {
  ctx.audit.operationId = ref.operationId;
  return json(202, ref);
}

export function containerAction(kind: 'restart' | 'stop' | 'start'): Route {
  const schema = obj({ expectedGeneration }, ['expectedGeneration']);
  const refusals: ErrorCode[] = ['NOT_FOUND', 'GENERATION_MISMATCH'];
  if (kind === 'stop') refusals.push('VM_SAFETY_REFUSED', 'ENGINE_TIMEOUT');
  return {
    doc: operationDoc(
      `${kind[0]?.toUpperCase()}${kind.slice(1)} a container`,
      schema,
      refusals,
      CONTAINER_PARAM,
    ),
    handler: async (ctx) => {
      const name = ctx.params.name ?? '';
      ctx.audit.target = name;
      const opts = await body<{ expectedGeneration?: number }>(ctx, schema);
      return accepted(ctx, await ctx.deps.actions[kind](name, opts));
    },
  };
}

const upgradeBody = obj({ image: IMAGE_REF, expectedGeneration }, ['expectedGeneration']);
export const upgradeContainer: Route = {
  doc: operationDoc(
    'Upgrade a container to an image (health-gated, rolled back on failure)',
    upgradeBody,
    ['NOT_FOUND', 'GENERATION_MISMATCH', 'DEFINITIONS_NOT_LOADED', 'IMAGE_REFUSED'],
    CONTAINER_PARAM,
  ),
  handler: async (ctx) => {
    const name = ctx.params.name ?? '';
    ctx.audit.target = name;
    const opts = await body<{ image: string; expectedGeneration?: number }>(ctx, upgradeBody);
    return accepted(ctx, await ctx.deps.actions.upgrade(name, opts));
  },
};

const rollbackBody = obj(
  {
    toGeneration: nullable(int(1, 'the generation to go back to (default: the last known good before it)')),
    force: nullable({ ...bool, description: 'roll back even when the health gate would refuse' }),
  },
  ['toGeneration', 'force'],
);
export const rollbackContainer: Route = {
  doc: operationDoc(
    'Roll a container back to an earlier generation',
    rollbackBody,
    ['NOT_FOUND', 'DEFINITIONS_NOT_LOADED'],
    CONTAINER_PARAM,
  ),
  handler: async (ctx) => {
    const name = ctx.params.name ?? '';
    ctx.audit.target = name;
    const opts = await body<{ toGeneration?: number; force?: boolean }>(ctx, rollbackBody);
    return accepted(ctx, await ctx.deps.actions.rollback(name, opts));
  },
};

const setUpgradeBody = obj(
  {
    images: nullable({
      type: 'object',
      title: 'container name -> image reference',
      additionalProperties: IMAGE_REF,
    }),
  },
  ['images'],
);
export const upgradeSet: Route = {
  doc: operationDoc(
    "Upgrade a set's containers one by one (new images by container name)",
    setUpgradeBody,
    ['NOT_FOUND', 'DEFINITIONS_NOT_LOADED', 'IMAGE_REFUSED'],
    SET_PARAM,
  ),
  handler: async (ctx) => {
    const path = ctx.params.set ?? '';
    ctx.audit.target = path;
    const opts = await body<{ images?: Record<string, string> }>(ctx, setUpgradeBody);
    return accepted(ctx, await ctx.deps.actions.upgradeSet(path, opts));
  },
};

const reloadBody = obj({});
export const reload: Route = {
  doc: operationDoc('Read the definitions again (and retry every quarantined container)', reloadBody, []),
  handler: async (ctx) => {
    ctx.audit.target = 'definitions';
    await body(ctx, reloadBody);
    return accepted(ctx, await ctx.deps.actions.reload());
  },
};
