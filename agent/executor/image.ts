import { SpcdError } from '../errors.js';
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

/** Makes the image present per the policy and reports its digest. Never touches a container. */
export async function resolveImage(
  deps: ExecutorDeps,
  ref: string,
  policy: PullPolicy,
  operationId: string,
  signal?: AbortSignal,
): Promise<ResolvedImage> {
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
