import type { CensusView, ErrorView } from '../api/types.js';
import type { EventBus, SpcdEvent } from '../model/events.js';

type CensusEvent = Extract<SpcdEvent, { type: 'census' }>;

/**
 * The last domain census of each hypervisor container and how many
 * mismatched (issue 12), from the `census` events on the bus: the status
 * view shows it, and a mismatch as the container's lastError until a later
 * census of that container matches.
 */
export class CensusLedger {
  private readonly last = new Map<string, CensusEvent>();
  private readonly mismatches = new Map<string, number>();

  constructor(events: EventBus) {
    events.subscribe((e) => {
      if (e.type !== 'census') return;
      this.last.set(e.container, e);
      if (e.outcome === 'mismatch')
        this.mismatches.set(e.container, (this.mismatches.get(e.container) ?? 0) + 1);
    });
  }

  view(name: string): CensusView | undefined {
    const e = this.last.get(name);
    if (!e) return undefined;
    return {
      outcome: e.outcome,
      action: e.action,
      operationId: e.operationId,
      at: new Date(e.at).toISOString(),
      before: e.before?.length ?? null,
      after: e.after?.length ?? null,
      missing: e.missing,
      added: e.added,
      vmProcesses: e.vmProcesses ?? null,
      detail: e.detail,
      mismatches: this.mismatches.get(name) ?? 0,
    };
  }

  /** DOMAIN_CENSUS_MISMATCH while the last census of `name` mismatched. */
  error(name: string): (ErrorView & { readonly atMs: number }) | undefined {
    const e = this.last.get(name);
    if (e?.outcome !== 'mismatch') return undefined;
    return {
      code: 'DOMAIN_CENSUS_MISMATCH',
      message: e.detail,
      at: new Date(e.at).toISOString(),
      atMs: e.at,
    };
  }
}
