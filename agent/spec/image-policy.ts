/**
 * Reads the node's image policy file (--image-policy, YAML or JSON), held to
 * the rule of every input spcd reads as root (trusted-paths.ts):
 *
 *   allow:
 *     - registry.example.com:5000/kolla          # every repository under it
 *     - prefix: quay.io/openstack.kolla
 *       requireDigest: true                      # only …@sha256:<digest>
 *     - prefix: registry.example.com/signed
 *       signedBy:                                # a GPG signature (implies requireDigest)
 *         keyring: /etc/spcd/keys/pubring.gpg
 *         fingerprints: ['0123…CDEF']
 *       lookaside: /var/lib/spcd/sigstore        # <dir>/<path>@sha256=<hex>/signature-<n>
 *   requireDigest: false                         # the default of the entries
 *
 * An entry names a registry host (with a dot, a port, or localhost) and
 * optionally a path under it; it is normalized like an image reference
 * (docker.io/library/… for Docker Hub's official images). signedBy and
 * lookaside go together (absolute paths; the keyring is held to the policy
 * file's rule). An empty list allows nothing. Throws SETTINGS_INVALID naming
 * the file and the entry's field.
 */
import { readFileSync, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import yaml from 'js-yaml';
import { SpcdError } from '../errors.js';
import type { ImagePolicy, ImagePolicyEntry, SignatureRequirement } from '../model/image-policy.js';
import { isNameComponent, parseImageRef } from '../model/image-ref.js';
import { assertTrusted } from './trusted-paths.js';

/** The policy file's size cap. */
export const IMAGE_POLICY_MAX_BYTES = 64 * 1024;

function bad(file: string, message: string, details: Record<string, unknown> = {}): SpcdError {
  return new SpcdError('SETTINGS_INVALID', `--image-policy ${file}: ${message}`, {
    flag: 'image-policy',
    file,
    ...details,
  });
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One entry's prefix, normalized: a registry host, then path components (no tag, no digest). */
function prefixOf(file: string, raw: unknown, i: number): string {
  const at = `allow[${i}]`;
  if (typeof raw !== 'string' || raw.trim() === '')
    throw bad(file, `${at}: must be a registry[/path] prefix`, { entry: i });
  const [host = '', ...path] = raw.trim().replace(/\/+$/, '').split('/');
  if (!(host.includes('.') || host.includes(':') || host === 'localhost'))
    throw bad(
      file,
      `${at}: '${raw}' must start with a registry host (a dot, a port or localhost; docker.io for Docker Hub)`,
      { entry: i },
    );
  const ref = parseImageRef(`${host}/x`);
  if ('invalid' in ref) throw bad(file, `${at}: '${raw}': ${ref.invalid}`, { entry: i });
  const wrong = path.find((p) => !isNameComponent(p));
  if (wrong !== undefined)
    throw bad(file, `${at}: '${raw}': '${wrong}' is not a lower-case name component (no tag or digest)`, {
      entry: i,
    });
  return [ref.registry, ...path].join('/');
}

const FINGERPRINT = /^(?:[0-9A-F]{40}|[0-9A-F]{64})$/;

function absolutePath(file: string, raw: unknown, at: string, i: number): string {
  if (typeof raw !== 'string' || !isAbsolute(raw) || raw.includes('\0'))
    throw bad(file, `${at} must be an absolute path`, { entry: i });
  return raw;
}

/** An entry's signedBy and lookaside, both or neither; undefined when neither. */
function signatureOf(file: string, e: Record<string, unknown>, i: number): SignatureRequirement | undefined {
  const at = `allow[${i}]`;
  if (e.signedBy === undefined && e.lookaside === undefined) return undefined;
  if (e.signedBy === undefined)
    throw bad(file, `${at}.lookaside is set without signedBy (the keys a signature must be by)`, {
      entry: i,
    });
  if (e.lookaside === undefined)
    throw bad(file, `${at}.lookaside is missing: signedBy needs the directory its signatures are in`, {
      entry: i,
    });
  const s = e.signedBy;
  if (!isMap(s)) throw bad(file, `${at}.signedBy must be a map with keyring and fingerprints`, { entry: i });
  for (const k of Object.keys(s))
    if (k !== 'keyring' && k !== 'fingerprints')
      throw bad(file, `${at}.signedBy: ${k} is not a field (known: keyring, fingerprints)`, { entry: i });
  const keyring = absolutePath(file, s.keyring, `${at}.signedBy.keyring`, i);
  const raw = s.fingerprints;
  if (!Array.isArray(raw) || raw.length === 0)
    throw bad(file, `${at}.signedBy.fingerprints must be a non-empty list of key fingerprints`, { entry: i });
  const fingerprints = raw.map((f: unknown, j) => {
    const hex = typeof f === 'string' ? f.replace(/\s+/g, '').toUpperCase() : '';
    if (!FINGERPRINT.test(hex))
      throw bad(
        file,
        `${at}.signedBy.fingerprints[${j}] must be a full key fingerprint (40 or 64 hex digits in quotes; gpg --fingerprint shows it)`,
        { entry: i },
      );
    return hex;
  });
  const lookaside = absolutePath(file, e.lookaside, `${at}.lookaside`, i);
  return { keyring, fingerprints, lookaside };
}

const ENTRY_FIELDS = ['prefix', 'requireDigest', 'signedBy', 'lookaside'];

/** One entry written as a map; `def` is the file's requireDigest. */
function entryOf(file: string, e: Record<string, unknown>, i: number, def: boolean): ImagePolicyEntry {
  for (const k of Object.keys(e))
    if (!ENTRY_FIELDS.includes(k))
      throw bad(file, `allow[${i}]: ${k} is not a field (known: ${ENTRY_FIELDS.join(', ')})`, { entry: i });
  const req = e.requireDigest ?? def;
  if (typeof req !== 'boolean') throw bad(file, `allow[${i}].requireDigest must be true or false`);
  const prefix = prefixOf(file, e.prefix, i);
  const signedBy = signatureOf(file, e, i);
  if (!signedBy) return { prefix, requireDigest: req };
  if (e.requireDigest === false) {
    const why = 'cannot be false with signedBy (a signature is over a digest)';
    throw bad(file, `allow[${i}].requireDigest ${why}`, { entry: i });
  }
  return { prefix, requireDigest: true, signedBy };
}

/** The policy in a file's text (pure; `file` names it in errors). */
export function parseImagePolicy(text: string, file: string): ImagePolicy {
  let doc: unknown;
  try {
    doc = yaml.load(text, { schema: yaml.CORE_SCHEMA, json: false });
  } catch (err) {
    throw bad(file, `not valid YAML: ${(err as Error).message}`);
  }
  if (!isMap(doc)) throw bad(file, 'must be a map with allow (and requireDigest)');
  for (const k of Object.keys(doc))
    if (k !== 'allow' && k !== 'requireDigest')
      throw bad(file, `${k} is not a field (known: allow, requireDigest)`);
  const def = doc.requireDigest ?? false;
  if (typeof def !== 'boolean') throw bad(file, 'requireDigest must be true or false');
  if (!Array.isArray(doc.allow)) throw bad(file, 'allow must be a list of registry[/path] prefixes');
  const entries: ImagePolicyEntry[] = doc.allow.map((e: unknown, i) =>
    isMap(e) ? entryOf(file, e, i, def) : { prefix: prefixOf(file, e, i), requireDigest: def },
  );
  return { entries, source: file };
}

/**
 * The policy in force: the file (its target, when a link) and every folder
 * above it must be root's and written by nobody else, as every input
 * (trusted-paths.ts: UNTRUSTED_PATH); whoever could write it could allow any
 * image. Once, at start-up.
 */
export async function loadImagePolicyFile(file: string): Promise<ImagePolicy> {
  const real = (await assertTrusted(file, '--image-policy file', 'file')) ?? file;
  const policy = readImagePolicyFile(real);
  const entries = await Promise.all(
    (policy.entries ?? []).map(async (e, i) => {
      if (!e.signedBy) return e;
      // Whoever could write the keyring could sign any image: held to the policy file's rule.
      const keyring = await assertTrusted(
        e.signedBy.keyring,
        `--image-policy ${real} allow[${i}].signedBy.keyring`,
        'file',
      );
      return { ...e, signedBy: { ...e.signedBy, keyring: keyring ?? e.signedBy.keyring } };
    }),
  );
  return { ...policy, entries };
}

/** Reads and parses the policy file. */
export function readImagePolicyFile(file: string): ImagePolicy {
  let text: string;
  try {
    if (statSync(file).size > IMAGE_POLICY_MAX_BYTES)
      throw bad(file, `is larger than ${IMAGE_POLICY_MAX_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof SpcdError) throw err;
    throw new SpcdError(
      'SETTINGS_INVALID',
      `--image-policy ${file}: cannot read it: ${(err as Error).message}`,
      { flag: 'image-policy', file },
      { cause: err },
    );
  }
  return parseImagePolicy(text, file);
}
