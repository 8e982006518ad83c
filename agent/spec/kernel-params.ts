import type { IpcMode, Ulimit, UtsMode } from '../model/spec.js';
import { byKey, type Reader } from './read.js';
import type { Where } from './where.js';

/**
 * ulimits and sysctls, checked at load time the way runc checks them at start,
 * so a bad value is a file:line problem instead of a failed create and a
 * rollback.
 */

export const ULIMIT_NAMES: readonly string[] = [
  'as',
  'core',
  'cpu',
  'data',
  'fsize',
  'locks',
  'memlock',
  'msgqueue',
  'nice',
  'nofile',
  'nproc',
  'rss',
  'rtprio',
  'rttime',
  'sigpending',
  'stack',
];

/** The kernel's largest fs.nr_open on 64-bit Linux; nofile can never be set above it (nor to unlimited). */
export const NOFILE_MAX = 2_147_483_584;

export function readUlimits(r: Reader, v: unknown, w: Where): Ulimit[] | undefined {
  const m = r.mapping(v, w);
  if (!m) return undefined;
  const out: Ulimit[] = [];
  let ok = true;
  for (const name of Object.keys(m)) {
    const lw = r.child(m, name, w);
    if (!ULIMIT_NAMES.includes(name)) {
      r.fail(lw, `unknown ulimit ${JSON.stringify(name)} (allowed: ${ULIMIT_NAMES.join(', ')})`);
      ok = false;
      continue;
    }
    const value = m[name];
    let soft: number | undefined;
    let hard: number | undefined;
    if (typeof value === 'number') {
      soft = hard = r.integer(value, lw, -1, Number.MAX_SAFE_INTEGER);
    } else {
      const lm = r.mapping(value, lw, ['soft', 'hard']);
      if (!lm) {
        ok = false;
        continue;
      }
      if (lm.soft === undefined || lm.hard === undefined) r.fail(lw, 'needs both soft and hard');
      else {
        soft = r.integer(lm.soft, r.child(lm, 'soft', lw), -1, Number.MAX_SAFE_INTEGER);
        hard = r.integer(lm.hard, r.child(lm, 'hard', lw), -1, Number.MAX_SAFE_INTEGER);
      }
    }
    if (soft === undefined || hard === undefined) {
      ok = false;
      continue;
    }
    if (hard !== -1 && (soft === -1 || soft > hard)) {
      r.fail(lw, `soft limit ${soft} is above hard limit ${hard} (-1 means unlimited)`);
      ok = false;
      continue;
    }
    if (name === 'nofile' && (hard === -1 || hard > NOFILE_MAX)) {
      r.fail(lw, `nofile cannot be unlimited nor above ${NOFILE_MAX} (the kernel's fs.nr_open ceiling)`);
      ok = false;
      continue;
    }
    out.push({ name, soft, hard });
  }
  return ok ? out.sort(byKey((u) => u.name)) : undefined;
}

export const SYSCTL_KEY = /^[a-z0-9_]+(?:\.[A-Za-z0-9_-]+)+$/;

/** The System V IPC sysctls that live in the IPC namespace (besides fs.mqueue.*). */
const IPC_SYSCTLS: ReadonlySet<string> = new Set([
  'kernel.msgmax',
  'kernel.msgmnb',
  'kernel.msgmni',
  'kernel.sem',
  'kernel.shmall',
  'kernel.shmmax',
  'kernel.shmmni',
  'kernel.shm_rmid_forced',
]);

/** The namespaces a container has: a sysctl is allowed only inside one of its own. */
export interface Namespaces {
  readonly network: string;
  readonly ipc: IpcMode;
  readonly uts: UtsMode;
}

/** Why runc would refuse this sysctl for a container with these namespaces; undefined when allowed. */
export function sysctlRefusal(key: string, ns: Namespaces): string | undefined {
  if (key.startsWith('net.')) {
    return ns.network === 'host'
      ? `${key} is not allowed with network: host (it would change the host)`
      : undefined;
  }
  if (key.startsWith('fs.mqueue.') || IPC_SYSCTLS.has(key)) {
    return ns.ipc === 'host' ? `${key} is not allowed with ipc: host (it would change the host)` : undefined;
  }
  if (key === 'kernel.domainname') {
    return ns.uts === 'host' ? `${key} is not allowed with uts: host (it would change the host)` : undefined;
  }
  if (key === 'kernel.hostname')
    return 'kernel.hostname is not allowed (runc refuses it: set the hostname instead)';
  return (
    `${key} is not in a container namespace; allowed: net.* (without network: host), ` +
    `kernel.msg*/shm*/sem and fs.mqueue.* (without ipc: host), kernel.domainname (without uts: host)`
  );
}

export function readSysctls(
  r: Reader,
  v: unknown,
  w: Where,
  ns: Namespaces,
): Record<string, string> | undefined {
  return r.textMap(v, w, {
    pattern: SYSCTL_KEY,
    what: 'a sysctl name (e.g. net.ipv4.ip_forward)',
    check: (k) => sysctlRefusal(k, ns),
    lineSafe: true,
  });
}
