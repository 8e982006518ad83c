/**
 * What a reload would do now (`spcctl plan`): the definitions and values on
 * disk, read without applying them, planned against the last observation,
 * each step with its masked config diffs, and every problem that held
 * something back.
 */
import { toSpcdError } from '../errors.js';
import type { UnlabeledFact } from '../model/adoption.js';
import type { ContainerSpec, DesiredState } from '../model/spec.js';
import type { PlanItem, PlanView } from '../api/types.js';
import type { DefinitionsPreview } from '../config/definitions.js';
import type { DesiredContainer, Plan } from '../planner/types.js';

export interface PlanViewDeps {
  /** The definitions and values on disk now (config/definitions.ts). */
  readonly preview: () => Promise<DefinitionsPreview>;
  /** The desired containers of these definitions, hashed with this config. */
  readonly desiredOf: (sets: DesiredState, hash: (spec: ContainerSpec) => string) => DesiredContainer[];
  readonly reconciler: {
    preview(desired: readonly DesiredContainer[], unlabeled?: ReadonlyMap<string, UnlabeledFact>): Plan;
    desiredContainers(): readonly DesiredContainer[];
  };
  /** The unlabeled containers under these desired names, with their differences from these definitions. */
  readonly unlabeledOf?: (
    desired: readonly DesiredContainer[],
  ) => Promise<ReadonlyMap<string, UnlabeledFact>>;
}

export async function planView(d: PlanViewDeps): Promise<PlanView> {
  const { sets, config, problems: read } = await d.preview();
  const problems = [...read];
  let desired: DesiredContainer[];
  try {
    desired = d.desiredOf(sets, (s) => config.hash(s));
  } catch (err) {
    problems.push(toSpcdError(err).message);
    desired = [...d.reconciler.desiredContainers()];
  }
  const unlabeled = d.unlabeledOf ? await d.unlabeledOf(desired).catch(() => undefined) : undefined;
  const p = d.reconciler.preview(desired, unlabeled);
  const items: PlanItem[] = [];
  for (const s of p.steps) {
    if (s.kind === 'remove') {
      items.push({
        container: s.observed.identity.container,
        set: s.observed.identity.set,
        action: 'remove',
        reason: s.reason,
      });
      continue;
    }
    // the operator's and heals' steps: not previewed
    if (s.kind === 'stop' || s.kind === 'upgrade' || s.kind === 'adopt' || s.kind === 'recover') continue;
    const action = s.kind === 'replace' ? 'recreate' : s.kind;
    const diffs = s.kind === 'start' ? [] : await config.diff(s.desired.spec).catch(() => []);
    items.push({
      container: s.desired.spec.name,
      set: s.desired.spec.set,
      action,
      reason: s.reason,
      ...(diffs.length > 0 ? { fileDiffs: diffs.map((f) => ({ file: f.path, diff: f.diff })) } : {}),
    });
  }
  const setOf = new Map(desired.map((c) => [c.spec.name, c.spec.set]));
  for (const a of p.adoptions ?? []) {
    const reason = a.blocked
      ? `blocked: ${a.blocked}`
      : "runs without spcd labels and matches its definition: adopted, not restarted, on the operator's word (spcctl adopt apply)";
    items.push({ container: a.container, set: setOf.get(a.container) ?? '', action: 'adopt', reason });
    if (a.blocked) problems.push(`${a.container}: adoption blocked: ${a.blocked}`);
  }
  const adopting = new Set((p.adoptions ?? []).map((a) => a.container));
  for (const w of [...(p.untouched ?? []), ...p.waiting])
    if (!adopting.has(w.container)) problems.push(`${w.container}: ${w.reason}`);
  return { items, problems };
}
