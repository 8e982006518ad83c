import {
  VOLUME_NAME,
  type BindMount,
  type DeviceMapping,
  type Propagation,
  type TmpfsMount,
} from '../model/spec.js';
import { byKey, isMapping, type Reader } from './read.js';
import type { Where } from './where.js';

/** binds, tmpfs and devices: short strings or long mappings, returned sorted. */

export const PROPAGATIONS: readonly Propagation[] = [
  'rprivate',
  'private',
  'rshared',
  'shared',
  'rslave',
  'slave',
];
export const BIND_KEYS = ['source', 'target', 'read_only', 'propagation'] as const;
/** The long form of a volume bind: no propagation. */
export const VOLUME_BIND_KEYS = ['source', 'target', 'read_only'] as const;
export const TMPFS_KEYS = ['target', 'options'] as const;
export const DEVICE_KEYS = ['host', 'container', 'permissions'] as const;
export const DEVICE_PERMISSIONS = /^(?!.*(.).*\1)[rwm]{1,3}$/;
export const TMPFS_OPTIONS = /^[A-Za-z0-9_]+(=[^,\s]+)?(,[A-Za-z0-9_]+(=[^,\s]+)?)*$/;

/** What a bind's source may be, for the messages that refuse one. */
const SOURCE_RULE = `an absolute host path or a volume name (${VOLUME_NAME.source.slice(1, -1)})`;

/** A bind's source: a host path (starts with "/") or a Docker named volume. */
function bindSource(
  r: Reader,
  value: unknown,
  where: Where,
): { kind: 'host' | 'volume'; source: string } | undefined {
  if (typeof value === 'string' && !value.startsWith('/')) {
    if (VOLUME_NAME.test(value)) return { kind: 'volume', source: value };
    r.fail(where, `${JSON.stringify(value)} is not ${SOURCE_RULE}`);
    return undefined;
  }
  const source = r.absPath(value, where);
  return source === undefined ? undefined : { kind: 'host', source };
}

/** A bind's target: an absolute path; a trailing "/" (kolla writes `/var/log/kolla/`) is dropped. */
function bindTarget(r: Reader, value: unknown, where: Where): string | undefined {
  const trimmed = typeof value === 'string' && value.length > 1 ? value.replace(/\/$/, '') : value;
  return r.absPath(trimmed, where);
}

/** The normalized bind; a volume with a propagation is refused at `where` (Docker applies none to one). */
function bindOf(
  r: Reader,
  parts: {
    from: { kind: 'host' | 'volume'; source: string };
    target: string;
    readOnly: boolean;
    propagation: Propagation | undefined;
  },
  where: Where,
): BindMount | undefined {
  const { from, target, readOnly, propagation } = parts;
  if (from.kind === 'volume') {
    if (propagation === undefined) return { kind: 'volume', source: from.source, target, readOnly };
    r.fail(
      where,
      `propagation ${propagation} applies to a host path only; volume ${from.source} takes ro or rw`,
    );
    return undefined;
  }
  return { source: from.source, target, readOnly, ...(propagation ? { propagation } : {}) };
}

function parseBindShort(r: Reader, text: string, where: Where): BindMount | undefined {
  const parts = text.split(':');
  if (parts.length < 2 || parts.length > 3) {
    r.fail(where, `${JSON.stringify(text)} is not "source:/target[:options]", source ${SOURCE_RULE}`);
    return undefined;
  }
  const from = bindSource(r, parts[0], where);
  const target = bindTarget(r, parts[1], where);
  let readOnly = false;
  let propagation: Propagation | undefined;
  let ok = from !== undefined && target !== undefined;
  if (parts.length === 3) {
    let mode: string | undefined;
    for (const opt of (parts[2] ?? '').split(',')) {
      if (opt === 'ro' || opt === 'rw') {
        if (mode !== undefined) {
          r.fail(where, `options ${JSON.stringify(parts[2])} give ro/rw more than once`);
          ok = false;
        }
        mode = opt;
        readOnly = opt === 'ro';
      } else if ((PROPAGATIONS as readonly string[]).includes(opt)) {
        if (propagation !== undefined) {
          r.fail(where, `options ${JSON.stringify(parts[2])} give a propagation more than once`);
          ok = false;
        }
        propagation = opt as Propagation;
      } else {
        r.fail(
          where,
          `unknown bind option ${JSON.stringify(opt)} (allowed: ro, rw, ${PROPAGATIONS.join(', ')})`,
        );
        ok = false;
      }
    }
  }
  if (!ok || from === undefined || target === undefined) return undefined;
  return bindOf(r, { from, target, readOnly, propagation }, where);
}

function parseBind(r: Reader, item: unknown, where: Where): BindMount | undefined {
  if (typeof item === 'string') return parseBindShort(r, item, where);
  if (!isMapping(item)) {
    r.fail(
      where,
      'must be a string "source:/target[:options]" or a mapping {source, target, read_only, propagation}',
    );
    return undefined;
  }
  const m = r.mapping(item, where, BIND_KEYS);
  if (!m) return undefined;
  const at = (k: string): Where => r.child(m, k, where);
  if (m.source === undefined) r.fail(where, 'source is required');
  if (m.target === undefined) r.fail(where, 'target is required');
  const from = m.source === undefined ? undefined : bindSource(r, m.source, at('source'));
  const target = m.target === undefined ? undefined : bindTarget(r, m.target, at('target'));
  const readOnly = m.read_only === undefined ? false : r.boolean(m.read_only, at('read_only'));
  const propagation =
    m.propagation === undefined ? undefined : r.oneOf(m.propagation, at('propagation'), PROPAGATIONS);
  if (from === undefined || target === undefined || readOnly === undefined) return undefined;
  if (m.propagation !== undefined && propagation === undefined) return undefined;
  return bindOf(r, { from, target, readOnly, propagation }, at('propagation'));
}

function parseTmpfs(r: Reader, item: unknown, where: Where): TmpfsMount | undefined {
  let target: string | undefined;
  let options = '';
  if (typeof item === 'string') {
    const colon = item.indexOf(':');
    target = r.absPath(colon < 0 ? item : item.slice(0, colon), where);
    options = colon < 0 ? '' : item.slice(colon + 1);
    if (colon >= 0 && !TMPFS_OPTIONS.test(options)) {
      r.fail(where, `tmpfs options ${JSON.stringify(options)} are not a comma list of key[=value]`);
      return undefined;
    }
  } else if (isMapping(item)) {
    const m = r.mapping(item, where, TMPFS_KEYS);
    if (!m) return undefined;
    if (m.target === undefined) r.fail(where, 'target is required');
    else target = r.absPath(m.target, r.child(m, 'target', where));
    if (m.options !== undefined) {
      const w = r.child(m, 'options', where);
      if (typeof m.options !== 'string' || (m.options !== '' && !TMPFS_OPTIONS.test(m.options))) {
        r.fail(w, 'must be a comma list of key[=value], e.g. "size=64m,mode=1777"');
        return undefined;
      }
      options = m.options;
    }
  } else {
    r.fail(where, 'must be a string "/target[:options]" or a mapping {target, options}');
    return undefined;
  }
  return target === undefined ? undefined : { target, options };
}

function parseDevice(r: Reader, item: unknown, where: Where): DeviceMapping | undefined {
  if (typeof item === 'string') {
    const parts = item.split(':');
    if (parts.length > 3) {
      r.fail(where, `${JSON.stringify(item)} is not "/host[:/container[:permissions]]"`);
      return undefined;
    }
    const host = r.absPath(parts[0], where);
    const container = parts[1] === undefined ? host : r.absPath(parts[1], where);
    const permissions = parts[2] ?? 'rwm';
    if (!DEVICE_PERMISSIONS.test(permissions)) {
      r.fail(where, `permissions ${JSON.stringify(permissions)} must be a combination of r, w, m`);
      return undefined;
    }
    return host === undefined || container === undefined ? undefined : { host, container, permissions };
  }
  if (!isMapping(item)) {
    r.fail(
      where,
      'must be a string "/host[:/container[:permissions]]" or a mapping {host, container, permissions}',
    );
    return undefined;
  }
  const m = r.mapping(item, where, DEVICE_KEYS);
  if (!m) return undefined;
  if (m.host === undefined) {
    r.fail(where, 'host is required');
    return undefined;
  }
  const host = r.absPath(m.host, r.child(m, 'host', where));
  const container = m.container === undefined ? host : r.absPath(m.container, r.child(m, 'container', where));
  let permissions = 'rwm';
  if (m.permissions !== undefined) {
    const p = r.string(m.permissions, r.child(m, 'permissions', where), {
      pattern: DEVICE_PERMISSIONS,
      what: 'a combination of r, w, m',
    });
    if (p === undefined) return undefined;
    permissions = p;
  }
  return host === undefined || container === undefined ? undefined : { host, container, permissions };
}

function parseList<T>(
  r: Reader,
  value: unknown,
  where: Where,
  one: (r: Reader, item: unknown, where: Where) => T | undefined,
): { item: T; where: Where }[] | undefined {
  const items = r.list(value, where);
  if (!items) return undefined;
  const out: { item: T; where: Where }[] = [];
  let ok = true;
  items.forEach((raw, i) => {
    const w = r.child(items, i, where);
    const t = one(r, raw, w);
    if (t === undefined) ok = false;
    else out.push({ item: t, where: w });
  });
  return ok ? out : undefined;
}

/** Targets mounted so far in one container (bind or tmpfs) -> the path of the entry that mounts it. */
export type MountTargets = Map<string, string>;

function unique<T>(
  r: Reader,
  items: { item: T; where: Where }[],
  key: (t: T) => string,
  seen: Map<string, string>,
  message: (k: string, first: string) => string,
): boolean {
  let ok = true;
  for (const { item, where } of items) {
    const k = key(item);
    const first = seen.get(k);
    if (first !== undefined) {
      r.fail(where, message(k, first));
      ok = false;
    } else seen.set(k, where.path);
  }
  return ok;
}

const mounted = (t: string, first: string): string => `target ${t} is already mounted by ${first}`;

/** `binds:`, sorted by target; a target mounted twice (here or by tmpfs read after) is refused. */
export function readBinds(r: Reader, v: unknown, w: Where, targets: MountTargets): BindMount[] | undefined {
  const list = parseList(r, v, w, parseBind);
  if (!list || !unique(r, list, (b) => b.target, targets, mounted)) return undefined;
  return list.map((b) => b.item).sort(byKey((b) => b.target));
}

/** `tmpfs:`, sorted by target; read after binds, whose targets it must not mount again. */
export function readTmpfs(r: Reader, v: unknown, w: Where, targets: MountTargets): TmpfsMount[] | undefined {
  const list = parseList(r, v, w, parseTmpfs);
  if (!list || !unique(r, list, (t) => t.target, targets, mounted)) return undefined;
  return list.map((t) => t.item).sort(byKey((t) => t.target));
}

/**
 * `devpts:` (Podman): the container paths where a new devpts instance is
 * mounted, sorted; read after binds and tmpfs, whose targets it must not
 * mount again.
 */
export function readDevpts(r: Reader, v: unknown, w: Where, targets: MountTargets): string[] | undefined {
  const list = parseList(r, v, w, (rr, item, where) => {
    if (typeof item === 'string' && item.includes(':')) {
      rr.fail(
        where,
        'a devpts mount takes no source or options: write only the container path, e.g. /dev/pts',
      );
      return undefined;
    }
    return rr.absPath(item, where);
  });
  if (!list || !unique(r, list, (t) => t, targets, mounted)) return undefined;
  return list.map((t) => t.item).sort();
}

/** `devices:`, sorted by container path, each container path once. */
export function readDevices(r: Reader, v: unknown, w: Where): DeviceMapping[] | undefined {
  const list = parseList(r, v, w, parseDevice);
  const used = (p: string, first: string): string => `container path ${p} is already used by ${first}`;
  if (!list || !unique(r, list, (d) => d.container, new Map(), used)) return undefined;
  return list.map((d) => d.item).sort(byKey((d) => d.container));
}
