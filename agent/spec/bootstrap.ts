import { CONTAINER_FIELDS } from '../model/container-fields.js';
import type { BootstrapTaskSpec } from '../model/spec.js';
import { CHECK_NAME } from './check.js';
import { readPlain } from './fields.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/**
 * A container's `bootstrap:` tasks -> specs. A task either replaces the
 * command (`command:`) or starts the container as it normally starts (for a
 * Kolla image: kolla_start, so kolla_set_configs runs) with extra
 * `environment:` such as KOLLA_BOOTSTRAP; it needs at least one of the two.
 */

export const BOOTSTRAP_TIMEOUT_MS = 600_000;
export const BOOTSTRAP_KEYS = ['name', 'command', 'environment', 'timeout', 'accept_exit_codes'] as const;

export function readBootstrap(r: Reader, v: unknown, w: Where): BootstrapTaskSpec[] | undefined {
  const list = r.list(v, w);
  if (!list) return undefined;
  const out: BootstrapTaskSpec[] = [];
  const names = new Map<string, string>();
  const before = r.problems.count;
  list.forEach((item, i) => {
    const iw = r.child(list, i, w);
    const m = r.mapping(item, iw, BOOTSTRAP_KEYS);
    if (!m) return;
    const at = (k: string): Where => r.child(m, k, iw);
    if (m.name === undefined) r.fail(iw, 'name is required');
    if (m.command === undefined && m.environment === undefined)
      r.fail(
        iw,
        'needs command (replaces the container command) or environment (the container starts as usual, e.g. kolla_start with KOLLA_BOOTSTRAP)',
      );
    const name =
      m.name === undefined
        ? undefined
        : r.string(m.name, at('name'), { pattern: CHECK_NAME, what: 'a task name ([a-z0-9][a-z0-9_.-]*)' });
    const command =
      m.command === undefined ? undefined : r.strings(m.command, at('command'), { nonEmpty: true });
    const environment =
      m.environment === undefined
        ? undefined
        : (readPlain(r, CONTAINER_FIELDS.environment.value, m.environment, at('environment')) as
            Record<string, string> | undefined);
    const timeoutMs =
      m.timeout === undefined ? BOOTSTRAP_TIMEOUT_MS : r.duration(m.timeout, at('timeout'), 1);
    let acceptExitCodes: number[] | undefined = [0];
    if (m.accept_exit_codes !== undefined) {
      const cw = at('accept_exit_codes');
      const codes = r.list(m.accept_exit_codes, cw);
      if (codes && codes.length === 0) r.fail(cw, 'must not be an empty list');
      const ints = codes?.map((c, j) => r.integer(c, r.child(codes, j, cw), 0, 255));
      acceptExitCodes =
        ints && ints.length > 0 && ints.every((c) => c !== undefined)
          ? [...new Set(ints as number[])].sort((a, b) => a - b)
          : undefined;
    }
    if (!name || timeoutMs === undefined || !acceptExitCodes) return;
    if (m.command !== undefined && !command) return;
    if (m.environment !== undefined && !environment) return;
    if (!command && !environment) return;
    const first = names.get(name);
    if (first !== undefined) {
      r.fail(at('name'), `task name "${name}" is already used by ${first}`);
      return;
    }
    names.set(name, iw.path);
    out.push({
      name,
      ...(command ? { command } : {}),
      ...(environment ? { environment } : {}),
      timeoutMs,
      acceptExitCodes,
    });
  });
  return r.problems.count === before ? out : undefined;
}
