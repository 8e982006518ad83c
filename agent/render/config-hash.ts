import { canonicalJson, CONFIG_HASH_SCHEME, pruneEmpty, sha256Hex } from '../model/hash.js';

/** What the config hash covers of each rendered file. */
export interface HashedFile {
  readonly dest: string;
  readonly owner: string;
  readonly mode: string;
  readonly content: string;
}

/**
 * The config hash (`spcd.config-hash`, scheme v1) over the rendered files and
 * kolla's config.json. config.json counts by meaning, not by text: a key at
 * its default (false, [], {}, null) and the order of keys do not count. So a
 * kolla option added to spcd later changes no hash of a container that does
 * not use it (docs/decisions/0007-hash-schemes.md). A config.json that spcd 0.1
 * could have written is hashed through the exact text it wrote, so the labels
 * it left still match; one that uses an option it did not know hashes its
 * pruned canonical form.
 */
export function configHash(files: readonly HashedFile[], configJson: string): string {
  const sorted = [...files]
    .sort((a, b) => (a.dest < b.dest ? -1 : a.dest > b.dest ? 1 : 0))
    .map((f) => ({ dest: f.dest, owner: f.owner, mode: f.mode, content: f.content }));
  return `${CONFIG_HASH_SCHEME}-${sha256Hex(canonicalJson({ files: sorted, configJson: hashedConfigJson(configJson) }))}`;
}

function hashedConfigJson(text: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return text;
  }
  const pruned = pruneEmpty(doc);
  return v1Text(pruned) ?? canonicalJson(pruned);
}

const V1_FILE_KEYS = ['source', 'dest', 'owner', 'perm'] as const;

type Doc = Record<string, unknown>;
const isDoc = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);
const onlyKeys = (d: Doc, keys: readonly string[]): boolean => Object.keys(d).every((k) => keys.includes(k));

/** The exact text spcd 0.1 wrote for this (pruned) config.json, or undefined when it could not have written it. */
function v1Text(doc: unknown): string | undefined {
  if (!isDoc(doc) || !onlyKeys(doc, ['command', 'config_files'])) return undefined;
  const command = doc.command;
  const files = doc.config_files ?? [];
  if (typeof command !== 'string' || !Array.isArray(files)) return undefined;
  const entries: Doc[] = [];
  for (const f of files) {
    if (!isDoc(f) || !onlyKeys(f, V1_FILE_KEYS) || !V1_FILE_KEYS.every((k) => typeof f[k] === 'string')) {
      return undefined;
    }
    entries.push({ source: f.source, dest: f.dest, owner: f.owner, perm: f.perm });
  }
  return `${JSON.stringify({ command, config_files: entries, permissions: [] }, null, 2)}\n`;
}
