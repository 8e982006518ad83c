/** The write routes: each long operation answers 202 with its OperationRef at once. */
import { readJsonBody } from '../body.js';
import { json, type RouteContext, type RouteResult } from '../context.js';
import type { OperationRef } from '../types.js';
import {
  imageRef,
  onlyFields,
  optionalBoolean,
  optionalGeneration,
  optionalImages,
  unprocessable,
} from '../validate.js';

function accepted(ctx: RouteContext, ref: OperationRef): RouteResult {
  ctx.audit.operationId = ref.operationId;
  return json(202, ref);
}

export function containerAction(kind: 'restart' | 'stop' | 'start') {
  return async (ctx: RouteContext): Promise<RouteResult> => {
    const name = ctx.params.name ?? '';
    ctx.audit.target = name;
    const body = await readJsonBody(ctx.req, ctx.limits);
    onlyFields(body, ['expectedGeneration']);
    const expectedGeneration = optionalGeneration(body, 'expectedGeneration', 0);
    const opts = expectedGeneration === undefined ? {} : { expectedGeneration };
    return accepted(ctx, await ctx.deps.actions[kind](name, opts));
  };
}

export async function upgradeContainer(ctx: RouteContext): Promise<RouteResult> {
  const name = ctx.params.name ?? '';
  ctx.audit.target = name;
  const body = await readJsonBody(ctx.req, ctx.limits);
  onlyFields(body, ['image', 'expectedGeneration']);
  if (body.image === undefined) throw unprocessable('image', 'is required');
  const image = imageRef(body.image, 'image');
  const expectedGeneration = optionalGeneration(body, 'expectedGeneration', 0);
  const opts = expectedGeneration === undefined ? { image } : { image, expectedGeneration };
  return accepted(ctx, await ctx.deps.actions.upgrade(name, opts));
}

export async function rollbackContainer(ctx: RouteContext): Promise<RouteResult> {
  const name = ctx.params.name ?? '';
  ctx.audit.target = name;
  const body = await readJsonBody(ctx.req, ctx.limits);
  onlyFields(body, ['toGeneration', 'force']);
  const toGeneration = optionalGeneration(body, 'toGeneration', 1);
  const force = optionalBoolean(body, 'force');
  const opts: { toGeneration?: number; force?: boolean } = {};
  if (toGeneration !== undefined) opts.toGeneration = toGeneration;
  if (force !== undefined) opts.force = force;
  return accepted(ctx, await ctx.deps.actions.rollback(name, opts));
}

export async function upgradeSet(ctx: RouteContext): Promise<RouteResult> {
  const path = ctx.params.set ?? '';
  ctx.audit.target = path;
  const body = await readJsonBody(ctx.req, ctx.limits);
  onlyFields(body, ['images']);
  const images = optionalImages(body, 'images');
  return accepted(ctx, await ctx.deps.actions.upgradeSet(path, images === undefined ? {} : { images }));
}

export async function reload(ctx: RouteContext): Promise<RouteResult> {
  ctx.audit.target = 'definitions';
  const body = await readJsonBody(ctx.req, ctx.limits);
  onlyFields(body, []);
  return accepted(ctx, await ctx.deps.actions.reload());
}
