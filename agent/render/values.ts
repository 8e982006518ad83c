import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import yaml from 'js-yaml';
import { SpcdError } from '../errors.js';
import { yamlReason } from './formats.js';

/**
 * Template values: the files they come from and how they merge. In increasing
 * precedence: the set's `defaults:`, the operator's globals file, per-host
 * overrides, the secrets file. Mappings merge key by key at every depth;
 * scalars and lists replace. Secret values are never logged, and masked in
 * diffs and error messages (see mask.ts).
 */

export interface ValueSources {
  setDefaults: Record<string, unknown>;
  globals: Record<string, unknown>;
  hostValues: Record<string, unknown>;
  secrets: Record<string, unknown>;
}

export interface LoadValueOptions {
  /** Refuse the file unless owned by root (or spcd) and only its owner may read or write it (mode & 0o077 === 0). */
  secret?: boolean;
  /** Size cap; default 1 MiB. */
  maxBytes?: number;
  /** A missing file gives {} instead of an error. */
  optional?: boolean;
}

export const DEFAULT_VALUES_MAX_BYTES = 1024 * 1024;

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

/** Keys that would reach Object.prototype through a plain assignment. */
function refuseUnsafeKeys(v: unknown, path: string, file: string): void {
  if (Array.isArray(v)) {
    v.forEach((item, i) => refuseUnsafeKeys(item, `${path}[${i}]`, file));
  } else if (isMapping(v)) {
    for (const [k, child] of Object.entries(v)) {
      const p = path ? `${path}.${k}` : k;
      if (k === '__proto__') {
        throw new SpcdError('SPEC_INVALID', `${file}: key ${p} is not allowed`, { file, path: p });
      }
      refuseUnsafeKeys(child, p, file);
    }
  }
}

/** Parses a values document (the rules of a values file); `file` names its source in errors. */
export function parseValues(text: string, file: string): Record<string, unknown> {
  const refuseAnchor = (event: string, state: { anchor?: string | null }): void => {
    if (event === 'close' && state.anchor !== null && state.anchor !== undefined) {
      throw new SpcdError(
        'SPEC_YAML',
        `${file}: anchors and aliases are not allowed (found &${state.anchor})`,
        {
          file,
        },
      );
    }
  };
  let doc: unknown;
  try {
    doc = yaml.load(text, {
      filename: file,
      schema: yaml.CORE_SCHEMA,
      json: false,
      listener: refuseAnchor as unknown as (this: unknown, event: 'open' | 'close', state: unknown) => void,
    });
  } catch (err) {
    if (err instanceof SpcdError) throw err;
    if (err instanceof yaml.YAMLException) {
      // Only the reason (its quoted parts cut: an unknown tag, an alias) and the
      // line: js-yaml's message quotes the file, and this may be the secrets file.
      const line = typeof err.mark?.line === 'number' ? err.mark.line + 1 : undefined;
      throw new SpcdError('SPEC_YAML', `${file}${line ? `:${line}` : ''}: ${yamlReason(err)}`, {
        file,
        ...(line ? { line } : {}),
      });
    }
    throw err;
  }
  return valuesOf(doc, file);
}

/** A parsed values document checked by the rules of a values file: a mapping, no `__proto__` key. */
export function valuesOf(doc: unknown, file: string): Record<string, unknown> {
  if (doc === undefined || doc === null) return {};
  if (!isMapping(doc)) {
    throw new SpcdError('SPEC_INVALID', `${file}: the top level must be a mapping`, { file });
  }
  refuseUnsafeKeys(doc, '', file);
  return doc;
}

function modeString(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;
}

/** Load one YAML values file (globals, host overrides or secrets). */
export async function loadValueFile(
  path: string,
  opts: LoadValueOptions = {},
): Promise<Record<string, unknown>> {
  const cap = opts.maxBytes ?? DEFAULT_VALUES_MAX_BYTES;
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOCTTY);
  } catch (err) {
    if (opts.optional && errnoCode(err) === 'ENOENT') return {};
    throw new SpcdError('SPEC_IO', `cannot open values file ${path}: ${errnoCode(err) ?? String(err)}`, {
      file: path,
    });
  }
  try {
    // fstat on the open descriptor: the mode checked is the mode of the file read.
    const st = await fh.stat();
    if (!st.isFile()) {
      throw new SpcdError('SPEC_IO', `values file ${path} is not a regular file`, { file: path });
    }
    // Owner root (or spcd's own user), as the rest of the path (docs/explanation/security.md, "Trusted paths").
    if (opts.secret && st.uid !== 0 && st.uid !== process.geteuid?.()) {
      throw new SpcdError(
        'SECRETS_INSECURE',
        `secrets file ${path} is owned by uid ${st.uid}, not root; spcd will not use it (chown root)`,
        { file: path, uid: st.uid },
      );
    }
    if (opts.secret && (st.mode & 0o077) !== 0) {
      throw new SpcdError(
        'SECRETS_INSECURE',
        `secrets file ${path} has mode ${modeString(st.mode)}; it must not be accessible by group or others (chmod 0600)`,
        { file: path, mode: modeString(st.mode) },
      );
    }
    if (st.size > cap) {
      throw new SpcdError(
        'SPEC_TOO_LARGE',
        `values file ${path} is ${st.size} bytes, over the cap of ${cap}`,
        {
          file: path,
          bytes: st.size,
          cap,
        },
      );
    }
    const buf = Buffer.alloc(cap + 1);
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, total, buf.length - total, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > cap) {
        throw new SpcdError('SPEC_TOO_LARGE', `values file ${path} is over the cap of ${cap} bytes`, {
          file: path,
          cap,
        });
      }
    }
    return parseValues(buf.subarray(0, total).toString('utf8'), path);
  } finally {
    await fh.close();
  }
}

function clone(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clone);
  if (isMapping(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, child] of Object.entries(v)) out[k] = clone(child);
    return out;
  }
  return v;
}

function mergeInto(base: Record<string, unknown>, over: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(over)) {
    if (k === '__proto__') continue;
    const cur = base[k];
    if (isMapping(cur) && isMapping(v)) mergeInto(cur, v);
    else base[k] = clone(v);
  }
}

/** Dotted paths of every leaf (scalar, list or empty mapping) of a values tree. */
export function leafPaths(v: Record<string, unknown>, prefix = '', out = new Set<string>()): Set<string> {
  for (const [k, child] of Object.entries(v)) {
    const p = prefix ? `${prefix}.${k}` : k;
    if (isMapping(child) && Object.keys(child).length > 0) leafPaths(child, p, out);
    else out.add(p);
  }
  return out;
}

/** Merge the four sources; a fresh tree, the inputs are not modified. */
export function mergeValues(s: ValueSources): { values: Record<string, unknown>; secretPaths: Set<string> } {
  const values: Record<string, unknown> = {};
  mergeInto(values, s.setDefaults);
  mergeInto(values, s.globals);
  mergeInto(values, s.hostValues);
  mergeInto(values, s.secrets);
  return { values, secretPaths: leafPaths(s.secrets) };
}

/**
 * The secret VALUES to mask: every string or number leaf of the secrets tree,
 * as text, plus the forms the shipped filters turn it into (urlencode for a
 * password in a URL, to_json's and to_yaml's quoting) so the encoded form is
 * masked too. A value with line breaks (a PEM key) is also masked line by
 * line: diffs and messages are read a line at a time, and a file may indent
 * or re-wrap it, so each of its lines (trimmed, however short) is a secret
 * of its own. Booleans and null are not secrets worth masking (masking
 * "true" everywhere would hide every diff).
 */
export function collectSecretValues(secrets: Record<string, unknown>, out = new Set<string>()): Set<string> {
  const forms = (text: string): void => {
    out.add(text);
    out.add(JSON.stringify(text).slice(1, -1));
    const dumped = yaml.dump(text, { lineWidth: -1 }).replace(/\n$/, '');
    if (/^["'].*["']$/s.test(dumped)) out.add(dumped.slice(1, -1));
  };
  const add = (text: string): void => {
    if (text.length === 0) return;
    forms(text);
    out.add(encodeURIComponent(text));
    if (!/[\r\n]/.test(text)) return;
    for (const line of text.split(/\r?\n|\r/)) {
      const t = line.trim();
      if (t.length > 0) forms(t);
    }
  };
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      add(v);
    } else if (typeof v === 'number') {
      add(String(v));
    } else if (Array.isArray(v)) {
      v.forEach(walk);
    } else if (isMapping(v)) {
      Object.values(v).forEach(walk);
    }
  };
  walk(secrets);
  return out;
}
