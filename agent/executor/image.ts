import { SpcdError } from '../errors.js';
import { checkImage, type ImagePolicy } from '../model/image-policy.js';
import type { ExecutorDeps } from './ports.js';

export type PullPolicy = 'always' | 'missing' | 'never';

export interface ResolvedImage {
  readonly id: string;
  /** "repo@sha256:…" of the reference, or null for a locally built image. */
  readonly digest: string | null;
  readonly labels: Readonly<Record<string, string>>;
  readonly pulled: boolean;
}

function repoOf(ref: string): string {
  const at = ref.indexOf('@');
  if (at >= 0) return ref.slice(0, at);
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  return colon > slash ? ref.slice(0, colon) : ref;
}

/**
 * Throws IMAGE_REFUSED when the node's image policy does not allow `image`.
 * The entry points (the API's verbs, the fleet's document) call it for an
 * early answer; resolveImage calls it before every pull and create.
 */
export function assertImageAllowed(
  policy: ImagePolicy,
  image: string,
  context: Record<string, unknown> = {},
): void {
  const v = checkImage(policy, image);
  if (v.allowed) return;
  throw new SpcdError('IMAGE_REFUSED', `image ${image} is refused by the image policy: ${v.reason}`, {
    image,
    reason: v.reason,
    ...(policy.source !== undefined ? { policy: policy.source } : {}),
    ...context,
  });
}

/**
 * Makes the image present per the pull policy and reports its digest. Never
 * touches a container. Every image a container is created from comes through
 * here first: one the image policy refuses is an IMAGE_REFUSED error and an
 * `image-refused` event, and the engine is not asked for it at all.
 */
export async function resolveImage(
  deps: ExecutorDeps,
  ref: string,
  policy: PullPolicy,
  operationId: string,
  signal?: AbortSignal,
): Promise<ResolvedImage> {
  try {
    assertImageAllowed(deps.imagePolicy, ref);
  } catch (err) {
    const reason = (err as SpcdError).details.reason as string;
    deps.events.publish({ type: 'image-refused', at: deps.clock.now(), operationId, image: ref, reason });
    deps.log.warn({ image: ref, reason, operationId }, 'image refused by the image policy');
    throw err;
  }
  const local = await deps.engine.imageInfo(ref);
  let info = local;
  let pulled = false;
  if (policy === 'always' || (policy === 'missing' && !local)) {
    const auth = await deps.registryAuth(ref);
    info = await deps.engine.pull({
      image: ref,
      ...(auth ? { auth } : {}),
      activityTimeoutMs: deps.pullActivityTimeoutMs,
      ...(signal ? { signal } : {}),
      onProgress: (p) =>
        deps.events.publish({
          type: 'pull-progress',
          at: deps.clock.now(),
          operationId,
          image: ref,
          status: p.status,
          ...(p.current !== undefined ? { current: p.current } : {}),
          ...(p.total !== undefined ? { total: p.total } : {}),
        }),
    });
    pulled = true;
  }
  if (!info) {
    throw new SpcdError(
      'IMAGE_PULL_FAILED',
      `image ${ref} is not present and the pull policy is '${policy}'`,
      {
        image: ref,
      },
    );
  }
  const repo = repoOf(ref);
  const digest = info.repoDigests.find((d) => d.startsWith(`${repo}@`)) ?? null;
  return { id: info.id, digest, labels: info.labels, pulled };
}
