import { toSpcdError } from '../errors.js';
import { compareCensus, describeMismatch, parseCensusListing } from '../model/census.js';
import type { CensusSpec } from '../model/spec.js';
import { escapeControl } from '../model/text.js';
import type { ExecEngine } from '../engine/types.js';
import type { ExecutorDeps } from './ports.js';

/** What the census needs: the engine's exec, the VM probe, the bus, the log and the clock. */
export type CensusDeps = Pick<ExecutorDeps, 'vms' | 'events' | 'log' | 'clock'> & {
  readonly engine: Pick<ExecEngine, 'exec'>;
};

/**
 * The domain census of a hypervisor container (issue 12). Before spcd stops
 * the container it asks the running hypervisor which domains run (the
 * `census:` command, e.g. `virsh list --uuid`); once the new instance is up
 * (after its health gate, or after a restart's start) it asks again, retrying
 * until the census deadline, and publishes a `census` event. A difference is
 * logged at error level and shown as the container's lastError
 * (DOMAIN_CENSUS_MISMATCH, by the status view). It never fails or rolls back
 * the operation: the VMs keep running either way, and going back to the older
 * hypervisor with VMs running is itself refused (docs/explanation/vm-survival.md).
 *
 * Why libvirt's listing and not the host's /proc: qemu processes survive the
 * swap whatever happens (they are outside the container), so /proc cannot
 * tell a domain the new libvirt manages from one it lost (the downgrade
 * orphan). The count from /proc is added to the event for comparison.
 */

/** Output kept from one listing: plenty for thousands of UUIDs. */
const CENSUS_OUTPUT_BYTES = 256 * 1024;
const RETRY_MS = 250;

export interface CensusBefore {
  readonly census: CensusSpec;
  /** The domains listed; undefined when the listing failed (then `error`). */
  readonly domains?: readonly string[];
  readonly error?: string;
}

type Listing = { readonly domains: string[] } | { readonly error: string };

async function listOnce(
  deps: CensusDeps,
  containerId: string,
  census: CensusSpec,
  timeoutMs: number,
): Promise<Listing> {
  try {
    const r = await deps.engine.exec(containerId, {
      argv: census.argv,
      timeoutMs,
      maxOutputBytes: CENSUS_OUTPUT_BYTES,
    });
    if (r.timedOut) return { error: `${census.argv.join(' ')} timed out after ${timeoutMs} ms` };
    if (r.exitCode !== 0) {
      const out = escapeControl(r.output.trim().slice(-200));
      return { error: `${census.argv.join(' ')} exited with ${r.exitCode}${out ? `: ${out}` : ''}` };
    }
    return { domains: parseCensusListing(r.output).map((d) => escapeControl(d)) };
  } catch (err) {
    return { error: `${census.argv.join(' ')} failed: ${toSpcdError(err).message}` };
  }
}

/** Lists the domains in the running hypervisor, once, within the census timeout. Never throws. */
export async function censusBefore(
  deps: CensusDeps,
  census: CensusSpec | undefined,
  containerId: string,
): Promise<CensusBefore | undefined> {
  if (!census) return undefined;
  const r = await listOnce(deps, containerId, census, census.timeoutMs);
  return 'domains' in r ? { census, domains: r.domains } : { census, error: r.error };
}

/** Lists again in the new instance, retrying until the deadline, then reports. Never throws. */
export async function censusAfter(
  deps: CensusDeps,
  before: CensusBefore | undefined,
  census: CensusSpec | undefined,
  ctx: {
    readonly operationId: string;
    readonly container: string;
    readonly action: string;
    readonly containerId: string;
  },
): Promise<void> {
  if (!before) return;
  const { clock } = deps;
  const use = census ?? before.census;
  let after: Listing | undefined;
  if (before.domains) {
    const deadline = clock.now() + use.timeoutMs;
    for (;;) {
      after = await listOnce(deps, ctx.containerId, use, Math.max(1, deadline - clock.now()));
      if ('domains' in after || clock.now() + RETRY_MS >= deadline) break;
      await new Promise<void>((r) => clock.setTimer(RETRY_MS, r));
    }
  }
  const vmProcesses = await deps.vms
    .runningVms()
    .then((v) => v.length)
    .catch(() => undefined);
  report(deps, ctx, before, after, vmProcesses);
}

function report(
  deps: CensusDeps,
  ctx: { readonly operationId: string; readonly container: string; readonly action: string },
  before: CensusBefore,
  after: Listing | undefined,
  vmProcesses: number | undefined,
): void {
  const base = {
    type: 'census' as const,
    at: deps.clock.now(),
    operationId: ctx.operationId,
    container: ctx.container,
    action: ctx.action,
    ...(vmProcesses !== undefined ? { vmProcesses } : {}),
  };
  const fields = { container: ctx.container, action: ctx.action, operationId: ctx.operationId, vmProcesses };
  if (!before.domains || !after) {
    const detail = `no census: the listing before the stop failed (${before.error ?? 'unknown'})`;
    deps.events.publish({ ...base, outcome: 'skipped', missing: [], added: [], detail });
    deps.log.warn(fields, detail);
    return;
  }
  if (!('domains' in after)) {
    const detail = `domain census of ${ctx.container} differs after ${ctx.action}: ${before.domains.length} domain(s) listed before the stop, none could be listed after (${after.error})`;
    deps.events.publish({
      ...base,
      outcome: 'mismatch',
      before: before.domains,
      missing: before.domains,
      added: [],
      detail,
    });
    deps.log.error({ ...fields, before: before.domains, error: after.error }, detail);
    return;
  }
  const c = compareCensus(before.domains, after.domains);
  if (c.ok) {
    const detail = `${after.domains.length} domain(s) listed before and after`;
    deps.events.publish({
      ...base,
      outcome: 'ok',
      before: before.domains,
      after: after.domains,
      missing: [],
      added: [],
      detail,
    });
    deps.log.info({ ...fields, domains: after.domains.length }, `domain census matches: ${detail}`);
    return;
  }
  const detail = describeMismatch(ctx.container, ctx.action, before.domains, after.domains, c);
  deps.events.publish({
    ...base,
    outcome: 'mismatch',
    before: before.domains,
    after: after.domains,
    missing: c.missing,
    added: c.added,
    detail,
  });
  deps.log.error({ ...fields, missing: c.missing, added: c.added }, detail);
}
