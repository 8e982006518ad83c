import type { ConfigFileSpec, KollaPermission } from '../model/spec.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/**
 * A container's `config:` (templates rendered into Kolla's config_files) and
 * `permissions:` (Kolla's config.json permissions) -> specs. Kolla's
 * set_configs.py resolves owners by name inside the container and reads perm
 * with Python's int(x, 0) after inserting "o", so perm is four octal digits.
 */

export const CONFIG_DEFAULTS = { owner: 'root', mode: '0600' } as const;

/** "user" or "user:group" (names as useradd takes them). */
export const OWNER = /^[a-z_][a-z0-9_-]*(?::[a-z_][a-z0-9_-]*)?$/;
// set_configs turns "0755" into 0o755 by putting "o" after the first digit, so
// "2750" would become "2o750", which Python refuses: no setuid/setgid/sticky bits.
export const MODE = /^0?[0-7]{3}$/;
export const PERM = /^0[0-7]{3}$/;
export const FORMATS = ['ini', 'yaml', 'json', 'text'] as const;
export const CONFIG_KEYS = [
  'template',
  'dest',
  'container_path',
  'owner',
  'mode',
  'format',
  'optional',
  'merge',
  'preserve_properties',
] as const;
export const PERMISSION_KEYS = ['path', 'owner', 'perm', 'recurse'] as const;
/** Glob characters set_configs expands in a permissions path. */
export const GLOB_PATH = /^\/[A-Za-z0-9_.*?[\]/@+-]*$/;

function formatFromName(dest: string): ConfigFileSpec['format'] {
  const ext = /\.([A-Za-z0-9]+)$/.exec(dest)?.[1]?.toLowerCase();
  if (ext === 'conf' || ext === 'ini') return 'ini';
  if (ext === 'yaml' || ext === 'yml') return 'yaml';
  if (ext === 'json') return 'json';
  return 'text';
}

function readOwner(r: Reader, v: unknown, w: Where): string | undefined {
  return r.string(v, w, { pattern: OWNER, what: 'a user or user:group name (e.g. nova or root:nova)' });
}

function readMode(r: Reader, v: unknown, w: Where, pattern: RegExp, what: string): string | undefined {
  if (typeof v !== 'string') {
    r.fail(w, `must be a quoted octal string like "0600", not ${typeof v}`);
    return undefined;
  }
  return r.string(v, w, { pattern, what })?.padStart(4, '0');
}

export function readConfig(r: Reader, v: unknown, w: Where): ConfigFileSpec[] | undefined {
  const list = r.list(v, w);
  if (!list) return undefined;
  const out: ConfigFileSpec[] = [];
  const dests = new Map<string, string>();
  const paths = new Map<string, string>();
  const before = r.problems.count;
  list.forEach((item, i) => {
    const iw = r.child(list, i, w);
    const m = r.mapping(item, iw, CONFIG_KEYS);
    if (!m) return;
    const at = (k: string): Where => r.child(m, k, iw);
    const flag = (k: string): boolean | undefined => (m[k] === undefined ? false : r.boolean(m[k], at(k)));
    for (const k of ['template', 'dest', 'container_path'] as const)
      if (m[k] === undefined) r.fail(iw, `${k} is required`);
    const template = m.template === undefined ? undefined : r.relPath(m.template, at('template'));
    const dest = m.dest === undefined ? undefined : r.relPath(m.dest, at('dest'));
    const containerPath =
      m.container_path === undefined ? undefined : r.absPath(m.container_path, at('container_path'));
    const owner = m.owner === undefined ? CONFIG_DEFAULTS.owner : readOwner(r, m.owner, at('owner'));
    const mode =
      m.mode === undefined
        ? CONFIG_DEFAULTS.mode
        : readMode(
            r,
            m.mode,
            at('mode'),
            MODE,
            'an octal file mode like "0600" (no setuid, setgid or sticky bit)',
          );
    const format =
      m.format === undefined
        ? dest
          ? formatFromName(dest)
          : 'text'
        : r.oneOf(m.format, at('format'), FORMATS);
    const optional = flag('optional');
    const merge = flag('merge');
    const preserveProperties = flag('preserve_properties');
    if (preserveProperties) {
      // set_configs copies the source's owner and mode then and ignores owner and perm.
      for (const k of ['owner', 'mode'] as const)
        if (m[k] !== undefined)
          r.fail(at(k), `${k} has no effect with preserve_properties: true (Kolla keeps the source's)`);
    }
    if (!template || !dest || !containerPath || !owner || !mode || !format) return;
    if (optional === undefined || merge === undefined || preserveProperties === undefined) return;
    const firstDest = dests.get(dest);
    if (firstDest !== undefined) {
      r.fail(at('dest'), `dest ${dest} is already used by ${firstDest}`);
      return;
    }
    const firstPath = paths.get(containerPath);
    if (firstPath !== undefined) {
      r.fail(at('container_path'), `container_path ${containerPath} is already used by ${firstPath}`);
      return;
    }
    dests.set(dest, iw.path);
    paths.set(containerPath, iw.path);
    out.push({
      template,
      dest,
      containerPath,
      owner,
      mode,
      format,
      ...(optional ? { optional } : {}),
      ...(merge ? { merge } : {}),
      ...(preserveProperties ? { preserveProperties } : {}),
    });
  });
  return r.problems.count === before ? out : undefined;
}

export function readPermissions(r: Reader, v: unknown, w: Where): KollaPermission[] | undefined {
  const list = r.list(v, w);
  if (!list) return undefined;
  const out: KollaPermission[] = [];
  const seen = new Map<string, string>();
  const before = r.problems.count;
  list.forEach((item, i) => {
    const iw = r.child(list, i, w);
    const m = r.mapping(item, iw, PERMISSION_KEYS);
    if (!m) return;
    const at = (k: string): Where => r.child(m, k, iw);
    for (const k of ['path', 'owner'] as const) if (m[k] === undefined) r.fail(iw, `${k} is required`);
    let path: string | undefined;
    if (m.path !== undefined) {
      path = r.string(m.path, at('path'), {
        pattern: GLOB_PATH,
        what: 'an absolute path inside the container (globs * ? [] allowed)',
      });
      if (
        path !== undefined &&
        ((path.length > 1 && path.endsWith('/')) || /\/\.\.?(\/|$)|\/\//.test(path))
      ) {
        r.fail(
          at('path'),
          `${JSON.stringify(path)} must not contain "..", "." or empty segments, nor end in "/"`,
        );
        path = undefined;
      }
    }
    const owner = m.owner === undefined ? undefined : readOwner(r, m.owner, at('owner'));
    const perm =
      m.perm === undefined
        ? undefined
        : readMode(r, m.perm, at('perm'), PERM, 'four octal digits starting with 0, like "0750"');
    const recurse = m.recurse === undefined ? false : r.boolean(m.recurse, at('recurse'));
    if (!path || !owner || (m.perm !== undefined && !perm) || recurse === undefined) return;
    const first = seen.get(path);
    if (first !== undefined) {
      r.fail(at('path'), `path ${path} is already used by ${first}`);
      return;
    }
    seen.set(path, iw.path);
    out.push({ path, owner, ...(perm !== undefined ? { perm } : {}), recurse });
  });
  return r.problems.count === before ? out : undefined;
}
