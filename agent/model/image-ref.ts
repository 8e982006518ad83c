/**
 * An image reference in the form the engine pulls it, normalized as Docker
 * does (distribution's reference grammar): a name without a registry is on
 * docker.io, a one-part name there is under library/, no tag and no digest
 * means :latest. The image policy (image-policy.ts) matches the normalized
 * repository, so `nova`, `docker.io/library/nova` and
 * `index.docker.io/library/nova:latest` are one image to it. Pure.
 */

export interface ImageRef {
  /** registry host[:port], lower-case (docker.io for Docker Hub). */
  readonly registry: string;
  /** The path under the registry, e.g. kolla/nova-compute (library/x on Docker Hub). */
  readonly path: string;
  readonly tag: string | undefined;
  /** algorithm:hex, e.g. sha256:… (undefined when the reference names none). */
  readonly digest: string | undefined;
  /** registry/path: what a policy entry is a prefix of. */
  readonly repository: string;
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const HOST =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$/;
const IPV6_HOST = /^\[[0-9a-fA-F:.]+\](?::[0-9]+)?$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$|^sha(384|512):[0-9a-f]{96,128}$/;

/** Whether `part` is one component of a repository path (lower-case, separators inside). */
export function isNameComponent(part: string): boolean {
  return COMPONENT.test(part);
}

/** Whether the first part of a name is a registry host (as Docker decides: a dot, a port, or localhost). */
function isRegistry(part: string): boolean {
  return part.includes('.') || part.includes(':') || part === 'localhost' || part.startsWith('[');
}

/** The reference normalized, or a reason it is not one (never throws). */
export function parseImageRef(raw: string): ImageRef | { readonly invalid: string } {
  if (raw.length === 0 || raw.length > 512) return { invalid: 'must be 1 to 512 characters' };
  let rest = raw;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) return { invalid: `digest '${digest}' is not sha256:<64 hex digits>` };
  }
  let tag: string | undefined;
  const slash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > slash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) return { invalid: `tag '${tag}' is not a tag` };
  }
  const parts = rest.split('/');
  let registry = 'docker.io';
  if (parts.length > 1 && isRegistry(parts[0]!)) {
    registry = parts.shift()!.toLowerCase();
    if (!HOST.test(registry) && !IPV6_HOST.test(registry))
      return { invalid: `registry '${registry}' is not a host[:port]` };
  }
  if (registry === 'index.docker.io') registry = 'docker.io';
  if (registry === 'docker.io' && parts.length === 1) parts.unshift('library');
  for (const p of parts)
    if (!COMPONENT.test(p)) return { invalid: `'${p}' is not a lower-case name component` };
  const path = parts.join('/');
  if (registry.length + 1 + path.length > 255) return { invalid: 'the name is longer than 255 characters' };
  return {
    registry,
    path,
    tag: tag ?? (digest === undefined ? 'latest' : undefined),
    digest,
    repository: `${registry}/${path}`,
  };
}

/** registry/path[:tag][@digest], as the policy's messages name an image. */
export function formatImageRef(r: ImageRef): string {
  return `${r.repository}${r.tag !== undefined ? `:${r.tag}` : ''}${r.digest !== undefined ? `@${r.digest}` : ''}`;
}
