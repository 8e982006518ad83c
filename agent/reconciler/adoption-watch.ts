import type { Logger } from '../log.js';
import type { UnlabeledFact } from '../model/adoption.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerEngine } from '../engine/types.js';
import type { DesiredContainer } from '../planner/types.js';
import type { StateStore } from '../state/store.js';

export interface AdoptionWatchDeps {
  readonly engine: Pick<ContainerEngine, 'inspectUnlabeled'>;
  readonly state: Pick<StateStore, 'record'>;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly instance: string;
}

/**
 * The unlabeled container under each desired name that no listed container
 * holds, with its differences from that definition (none are computed for
 * an adopted name: another id there changed under spcd whatever it is).
 */
export async function findUnlabeled(
  deps: Pick<AdoptionWatchDeps, 'engine' | 'state' | 'instance'>,
  listed: readonly ObservedContainer[],
  desired: readonly DesiredContainer[],
): Promise<Map<string, UnlabeledFact>> {
  const taken = new Set(listed.map((o) => o.name));
  const facts = new Map<string, UnlabeledFact>();
  for (const d of desired) {
    const name = d.spec.name;
    if (taken.has(name)) continue;
    const adopted = deps.state.record(name)?.adopted;
    const identity = {
      instance: deps.instance,
      set: d.spec.set,
      container: name,
      generation: 1,
      specHash: d.specHash,
      configHash: d.configHash,
    };
    const found = await deps.engine.inspectUnlabeled(name, adopted ? undefined : { spec: d.spec, identity });
    if (found) facts.set(name, { container: found, ...(adopted ? { adoptedId: adopted.id } : {}) });
  }
  return facts;
}

/**
 * The containers without spcd labels under desired names, found after each
 * listing: the planner creates nothing under such a name, plans `adopt` on
 * the operator's word, and shows how each differs from its definition. An
 * adopted name under which another id now runs changed under spcd: it is
 * reported (an event, once per id, and the plan's reason), not managed and
 * not fought.
 */
export class AdoptionWatch {
  private facts: ReadonlyMap<string, UnlabeledFact> = new Map();
  private readonly reported = new Map<string, string>();

  constructor(private readonly deps: AdoptionWatchDeps) {}

  unlabeled(): ReadonlyMap<string, UnlabeledFact> {
    return this.facts;
  }

  /** After a listing: every desired name that no listed container holds is looked up (one inspect each). */
  async observe(listed: readonly ObservedContainer[], desired: readonly DesiredContainer[]): Promise<void> {
    const facts = await findUnlabeled(this.deps, listed, desired);
    for (const [name, f] of facts) if (f.adoptedId) this.report(name, f.adoptedId, f.container.id);
    this.facts = facts;
  }

  private report(name: string, adoptedId: string, id: string): void {
    if (this.reported.get(name) === id) return;
    this.reported.set(name, id);
    const reason = `adopted ${adoptedId.slice(0, 12)} was replaced outside spcd by ${id.slice(0, 12)}; left alone`;
    this.deps.log.warn({ container: name, adoptedId, id }, 'adopted container changed under spcd');
    this.deps.events.publish({
      type: 'state',
      at: this.deps.clock.now(),
      container: name,
      from: 'adopted',
      to: 'changed-under-spcd',
      reason,
    });
  }
}
