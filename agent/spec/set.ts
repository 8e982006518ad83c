import { startOrder } from '../model/order.js';
import type { ContainerSpec, SetSpec } from '../model/spec.js';
import type { CheckLibrary } from './check.js';
import { CONTAINER_NAME, validateContainer } from './container.js';
import { applyOverride, type Overrides } from './overrides.js';
import { isMapping, typeName, type Mapping, type Reader } from './read.js';
import type { Where } from './where.js';

/** One set file (a tree of sets) -> SetSpec. */

export const SET_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const ROOT_KEYS = ['set', 'description', 'defaults', 'containers', 'sets'] as const;
export const SUBSET_KEYS = ['description', 'defaults', 'containers', 'sets'] as const;

export interface SetContext {
  readonly library: CheckLibrary | undefined;
  readonly overrides: Overrides | undefined;
  /** Override entries that matched a container (the rest are reported by the caller). */
  readonly usedOverrides: Set<string>;
  /** Every container name seen on the host so far, with where it was defined. */
  readonly containers: Map<string, Where>;
}

export function validateSetFile(r: Reader, raw: unknown, file: string, ctx: SetContext): SetSpec | undefined {
  const root: Where = { file, line: r.loc.info(raw)?.line ?? 1, path: '' };
  if (raw === null || raw === undefined) {
    r.fail({ file, line: 0, path: '' }, 'the file is empty (a set file needs at least "set:")');
    return undefined;
  }
  const m = r.mapping(raw, root, ROOT_KEYS);
  if (!m) return undefined;
  if (m.set === undefined) {
    r.fail(root, 'set is required (the set name)');
    return undefined;
  }
  const name = r.string(m.set, r.child(m, 'set', root), {
    pattern: SET_NAME,
    what: 'a set name ([a-z0-9][a-z0-9_-]{0,62})',
  });
  if (name === undefined) return undefined;
  return validateSetBody(r, m, root, name, name, ctx);
}

function validateSetBody(
  r: Reader,
  m: Mapping,
  where: Where,
  name: string,
  path: string,
  ctx: SetContext,
): SetSpec | undefined {
  const before = r.problems.count;
  const at = (k: string): Where => r.child(m, k, where);

  let description = '';
  if (m.description !== undefined) {
    if (typeof m.description !== 'string')
      r.fail(at('description'), `must be a string, not ${typeName(m.description)}`);
    else description = m.description;
  }
  let defaults: Record<string, unknown> = {};
  if (m.defaults !== undefined) defaults = r.data(m.defaults, at('defaults')) ?? {};

  const containers = validateContainers(
    r,
    m.containers === undefined ? undefined : at('containers'),
    m,
    path,
    ctx,
  );
  checkStartOrder(r, containers, where);

  const sets: SetSpec[] = [];
  if (m.sets !== undefined) {
    const sw = at('sets');
    const sm = r.mapping(m.sets, sw);
    for (const sub of Object.keys(sm ?? {})) {
      const w = r.child(sm, sub, sw);
      if (!SET_NAME.test(sub)) {
        r.fail(w, `${JSON.stringify(sub)} is not a set name ([a-z0-9][a-z0-9_-]{0,62})`);
        continue;
      }
      const body = r.mapping(sm?.[sub], w, SUBSET_KEYS);
      if (!body) continue;
      const spec = validateSetBody(r, body, w, sub, `${path}/${sub}`, ctx);
      if (spec) sets.push(spec);
    }
  }

  if (r.problems.count !== before) return undefined;
  return {
    name,
    path,
    description,
    defaults,
    containers: containers.specs,
    sets,
    source: `${where.file}:${where.line}`,
  };
}

/** The set's containers, each validated (with its override applied) under a name unique on the host. */
interface SetContainers {
  readonly specs: ContainerSpec[];
  readonly where: Map<string, Where>;
  readonly raw: Map<string, unknown>;
}

function validateContainers(
  r: Reader,
  cw: Where | undefined,
  m: Mapping,
  path: string,
  ctx: SetContext,
): SetContainers {
  const found: SetContainers = { specs: [], where: new Map(), raw: new Map() };
  if (cw === undefined) return found;
  const cm = r.mapping(m.containers, cw);
  if (!cm) return found;
  const siblings = new Set(Object.keys(cm));
  for (const cname of Object.keys(cm)) {
    const w = r.child(cm, cname, cw);
    if (!CONTAINER_NAME.test(cname)) {
      r.fail(w, `${JSON.stringify(cname)} is not a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)`);
      continue;
    }
    const first = ctx.containers.get(cname);
    if (first) {
      r.fail(
        w,
        `container ${cname} is already defined at ${first.file}:${first.line} (container names are unique on the host)`,
      );
      continue;
    }
    ctx.containers.set(cname, w);
    found.where.set(cname, w);
    let rawContainer = cm[cname];
    const ov = ctx.overrides?.containers.get(cname);
    if (ov && isMapping(rawContainer)) {
      ctx.usedOverrides.add(cname);
      rawContainer = applyOverride(r, rawContainer, w, ov);
    }
    found.raw.set(cname, rawContainer);
    const spec = validateContainer(r, rawContainer, w, {
      name: cname,
      set: path,
      siblings,
      library: ctx.library,
    });
    if (spec) found.specs.push(spec);
  }
  return found;
}

/** SPEC_CYCLE at the depends_on of the first container in a cycle. */
function checkStartOrder(r: Reader, containers: SetContainers, where: Where): void {
  const order = startOrder(containers.specs);
  if ('cycle' in order) {
    const head = order.cycle[0] ?? '';
    const hw = containers.where.get(head) ?? where;
    const dw = r.child(containers.raw.get(head), 'depends_on', hw);
    r.fail(dw, `depends_on forms a cycle: ${order.cycle.join(' -> ')}`, 'SPEC_CYCLE');
  }
}
