import type { ContainerSpec } from './spec.js';

/**
 * Start order: a topological sort of depends_on that keeps file order among
 * containers that do not depend on each other. Returns the cycle when there
 * is one (spec/ rejects those at load time; this is the pure core).
 */
export function startOrder(
  containers: readonly ContainerSpec[],
): { order: ContainerSpec[] } | { cycle: string[] } {
  const byName = new Map(containers.map((c) => [c.name, c]));
  const state = new Map<string, 'visiting' | 'done'>();
  const order: ContainerSpec[] = [];
  const stack: string[] = [];

  const visit = (c: ContainerSpec): string[] | undefined => {
    const seen = state.get(c.name);
    if (seen === 'done') return undefined;
    if (seen === 'visiting') return [...stack.slice(stack.indexOf(c.name)), c.name];
    state.set(c.name, 'visiting');
    stack.push(c.name);
    for (const dep of c.dependsOn) {
      const d = byName.get(dep);
      if (!d) continue;
      const cycle = visit(d);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(c.name, 'done');
    order.push(c);
    return undefined;
  };

  for (const c of containers) {
    const cycle = visit(c);
    if (cycle) return { cycle };
  }
  return { order };
}
