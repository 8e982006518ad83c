import {
  CONFIG_HASH_SCHEME,
  engineFacingSpec,
  HASH_SCHEME,
  hashScheme,
  NO_CONFIG_HASH,
  schemeHash,
  specHash,
} from './hash.js';
import type { ContainerSpec } from './spec.js';

/**
 * Every past spec-hash scheme, kept so a container labelled by an older spcd
 * is judged by the rules it was created under (docs/decisions/0007-hash-schemes.md):
 * the desired spec hashed under the label's scheme is equal -> adopt as it
 * is, different -> a real edit -> replace (which writes the current scheme).
 * A scheme not listed here (a newer spcd wrote it, spcd was downgraded) says
 * nothing about the spec: the container is left as it is and reported.
 *
 * Each entry is frozen: `fields` are the ContainerSpec fields the scheme
 * hashed, `hash` its exact function. test/unit/hash-schemes.test.ts pins
 * their values; never edit one, add a scheme instead.
 */
interface PastScheme {
  readonly fields: readonly string[];
  readonly hash: (spec: ContainerSpec) => string;
}

/** The fields v1 (spcd 0.1) hashed: every one present, an absent optional one as null. */
const V1_FIELDS = [
  'name',
  'image',
  'command',
  'entrypoint',
  'user',
  'workingDir',
  'environment',
  'privileged',
  'pid',
  'network',
  'ipc',
  'uts',
  'cgroupns',
  'binds',
  'tmpfs',
  'devices',
  'capAdd',
  'capDrop',
  'securityOpt',
  'ulimits',
  'sysctls',
  'memoryBytes',
  'shmSizeBytes',
  'init',
  'labels',
  'stopSignal',
  'stopGraceMs',
] as const satisfies readonly (keyof ContainerSpec)[];

function v1Form(spec: ContainerSpec): Record<string, unknown> {
  return Object.fromEntries(V1_FIELDS.map((field) => [field, spec[field] ?? null]));
}

export const PAST_SPEC_SCHEMES: Readonly<Record<string, PastScheme>> = {
  v1: { fields: V1_FIELDS, hash: (spec) => schemeHash('v1', v1Form(spec)) },
};

/** Schemes this spcd can judge, oldest first. */
export function knownSpecSchemes(): string[] {
  return [...Object.keys(PAST_SPEC_SCHEMES), HASH_SCHEME];
}

/**
 * The desired spec hashed under `scheme`: undefined when the scheme is
 * unknown, null when the spec uses an option that scheme did not know (so no
 * container labelled with it can match: that is an edit). `fields` as for
 * engineFacingSpec.
 */
export function specHashUnder(
  scheme: string,
  spec: ContainerSpec,
  fields?: Readonly<Record<string, boolean>>,
): string | null | undefined {
  if (scheme === HASH_SCHEME) return specHash(spec);
  const past = PAST_SPEC_SCHEMES[scheme];
  if (!past) return undefined;
  const known = new Set<string>(past.fields);
  if (Object.keys(engineFacingSpec(spec, fields)).some((field) => !known.has(field))) return null;
  return past.hash(spec);
}

export type HashVerdict =
  | { readonly kind: 'same' }
  | { readonly kind: 'changed' }
  /** Written under a scheme this spcd does not know: say nothing, touch nothing. */
  | { readonly kind: 'unknown-scheme'; readonly scheme: string };

/**
 * A container's spec-hash label against the desired spec. `current` is the
 * desired spec's hash under HASH_SCHEME when the caller has it already.
 */
export function compareSpecHash(label: string, spec: ContainerSpec, current?: string): HashVerdict {
  const scheme = hashScheme(label);
  const desired = scheme === HASH_SCHEME ? (current ?? specHash(spec)) : specHashUnder(scheme, spec);
  if (desired === undefined) return { kind: 'unknown-scheme', scheme };
  return desired === label ? { kind: 'same' } : { kind: 'changed' };
}

/**
 * A container's config-hash label against the desired config hash. 'none'
 * (no config files) has no scheme. There is one config scheme so far
 * (CONFIG_HASH_SCHEME); a label under another is a newer spcd's. A future
 * config scheme must keep the old function and let the planner compare the
 * desired config under the label's scheme, as for spec hashes.
 */
export function compareConfigHash(label: string, desired: string): HashVerdict {
  if (label === desired) return { kind: 'same' };
  const scheme = hashScheme(label);
  if (label !== NO_CONFIG_HASH && desired !== NO_CONFIG_HASH && scheme !== hashScheme(desired)) {
    return { kind: 'unknown-scheme', scheme };
  }
  return { kind: 'changed' };
}

/** The words for an unknown scheme, in plans, status and logs. */
export function unknownSchemeReason(kind: 'spec' | 'config', scheme: string): string {
  const shown = scheme === '' ? 'no scheme' : `scheme ${scheme}`;
  return `labelled by a newer spcd (${kind} hash ${shown}; this spcd knows ${kind === 'spec' ? knownSpecSchemes().join(', ') : CONFIG_HASH_SCHEME}): left as it is, not recreated`;
}
