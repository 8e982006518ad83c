import { SpcdError } from '../errors.js';
import { checkImage, type ImagePolicy, type ImageVerdict } from '../model/image-policy.js';
import type { RegistryAuth } from '../engine/types.js';
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
): Extract<ImageVerdict, { allowed: true }> {
  const v = checkImage(policy, image);
  if (v.allowed) return v;
  throw refusal(policy, image, v.reason, context);
}

function refusal(
  policy: ImagePolicy,
  image: string,
  reason: string,
  context: Record<string, unknown> = {},
): SpcdError {
  return new SpcdError('IMAGE_REFUSED', `image ${image} is refused by the image policy: ${reason}`, {
    image,
    reason,
    ...(policy.source !== undefined ? { policy: policy.source } : {}),
    ...context,
  });
}

/**
 * The policy's verdict on `ref` and, when its entry requires one, the
 * signature's (before the engine is asked anything). A refusal is an
 * `image-refused` event, a warning and IMAGE_REFUSED.
 */
async function admitImage(
  deps: ExecutorDeps,
  ref: string,
  operationId: string,
  signal?: AbortSignal,
): Promise<void> {
  let reason: string;
  try {
    const v = assertImageAllowed(deps.imagePolicy, ref);
    if (!v.signature || !v.ref?.digest) return;
    const verdict = deps.imageSignatures
      ? await deps.imageSignatures.verify(
          {
            registry: v.ref.registry,
            path: v.ref.path,
            digest: v.ref.digest,
            requirement: v.signature,
            ...(await authFor(deps, ref)),
          },
          signal,
        )
      : { verified: false as const, reason: 'no signature verifier is configured on this node' };
    if (verdict.verified) {
      deps.log.info(
        { image: ref, fingerprint: verdict.fingerprint, operationId },
        'image signature verified',
      );
      return;
    }
    reason = `signature not verified: ${verdict.reason}`;
  } catch (err) {
    if (!(err instanceof SpcdError) || err.code !== 'IMAGE_REFUSED') throw err;
    reason = err.details.reason as string;
  }
  deps.events.publish({ type: 'image-refused', at: deps.clock.now(), operationId, image: ref, reason });
  deps.log.warn({ image: ref, reason, operationId }, 'image refused by the image policy');
  throw refusal(deps.imagePolicy, ref, reason);
}

async function authFor(deps: ExecutorDeps, ref: string): Promise<{ auth?: RegistryAuth }> {
  const auth = await deps.registryAuth(ref);
  return auth ? { auth } : {};
}

/**
 * Makes the image present per the pull policy and reports its digest. Never
 * touches a container. Every image a container is created from comes through
 * here first: one the image policy refuses (or whose required signature does
 * not verify) is an IMAGE_REFUSED error and an `image-refused` event, and the
 * engine is not asked for it at all.
 */
export async function resolveImage(
  deps: ExecutorDeps,
  ref: string,
  policy: PullPolicy,
  operationId: string,
  signal?: AbortSignal,
): Promise<ResolvedImage> {
  await admitImage(deps, ref, operationId, signal);
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
