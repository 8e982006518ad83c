/**
 * The node's image policy: which images this host runs, whoever asks for
 * them (the fleet channel, the local API, the container sets and
 * overrides). Like containers-policy.json's per-scope rules and an admission
 * controller's allowed registries: a list of repository prefixes, matched on
 * the normalized reference (image-ref.ts) at a path boundary, each entry
 * optionally requiring a digest (`@sha256:`), so a tag that moves cannot
 * change what runs. An entry may also require a GPG "simple signing"
 * signature by one of its keys, found in a lookaside directory
 * (containers-policy.json's signedBy); that implies a digest, and the
 * signature itself is checked by the executor (image.ts), not here. No policy
 * means every image is allowed (spcd warns at start-up). Pure: the file is
 * read by agent/spec/image-policy.ts.
 */
import { formatImageRef, parseImageRef, type ImageRef } from './image-ref.js';

export interface ImagePolicyEntry {
  /** registry[/path…], normalized: an image is allowed when its repository is this or under it. */
  readonly prefix: string;
  readonly requireDigest: boolean;
  /** A signature an image under this entry must carry (implies requireDigest). */
  readonly signedBy?: SignatureRequirement;
}

/** Who must have signed an image, and where its signatures are. */
export interface SignatureRequirement {
  /** A GPG public keyring (binary or armored) holding the signers' keys. */
  readonly keyring: string;
  /** The accepted signing keys' fingerprints (upper-case hex). */
  readonly fingerprints: readonly string[];
  /** The lookaside directory: <lookaside>/<path>@<algo>=<hex>/signature-<n>. */
  readonly lookaside: string;
}

export interface ImagePolicy {
  /** Undefined: no policy configured, every image is allowed. */
  readonly entries: readonly ImagePolicyEntry[] | undefined;
  /** Where it was read from (for messages). */
  readonly source: string | undefined;
}

export const ALLOW_ALL: ImagePolicy = { entries: undefined, source: undefined };

export type ImageVerdict =
  | {
      readonly allowed: true;
      readonly ref: ImageRef | undefined;
      /** Set when the deciding entry wants a signature: the executor verifies it before any pull. */
      readonly signature?: SignatureRequirement;
    }
  | { readonly allowed: false; readonly reason: string };

function under(repository: string, prefix: string): boolean {
  return repository === prefix || repository.startsWith(`${prefix}/`);
}

/** Whether this node may run `image`; the reason names the rule it broke. */
export function checkImage(policy: ImagePolicy, image: string): ImageVerdict {
  if (policy.entries === undefined) return { allowed: true, ref: undefined };
  const ref = parseImageRef(image);
  if ('invalid' in ref) return { allowed: false, reason: `not an image reference: ${ref.invalid}` };
  const matching = policy.entries.filter((e) => under(ref.repository, e.prefix));
  if (matching.length === 0)
    return {
      allowed: false,
      reason: `${ref.repository} is under none of the allowed prefixes (${policy.entries.map((e) => e.prefix).join(', ') || 'none'})`,
    };
  // the most specific entry decides
  const rule = matching.reduce((a, b) => (b.prefix.length > a.prefix.length ? b : a));
  if ((rule.requireDigest || rule.signedBy) && ref.digest === undefined)
    return {
      allowed: false,
      reason: `${formatImageRef(ref)} has no digest and ${rule.prefix} requires one${rule.signedBy ? ' (it requires a signature, which is over a digest)' : ''} (name it as …@sha256:<digest>)`,
    };
  return { allowed: true, ref, ...(rule.signedBy ? { signature: rule.signedBy } : {}) };
}

/** The prefixes whose images must be signed (their entries name signedBy). */
export function signedPrefixes(policy: ImagePolicy): string[] {
  return (policy.entries ?? []).filter((e) => e.signedBy !== undefined).map((e) => e.prefix);
}
