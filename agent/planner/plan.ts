import { compareConfigHash, compareSpecHash, unknownSchemeReason } from '../model/hash-schemes.js';
import { adoptionBlock, type UnlabeledFact } from '../model/adoption.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import {
  NO_FACTS,
  type DesiredContainer,
  type Intent,
  type Quarantined,
  type OperatorOrigin,
  type Plan,
  type RecoverOrigin,
  type RuntimeFacts,
  type Step,
} from './types.js';

export interface PlanInput {
  readonly desired: readonly DesiredContainer[];
  readonly observed: readonly ObservedContainer[];
  readonly facts: ReadonlyMap<string, RuntimeFacts>;
  readonly now: number;
  /** Containers with an unresolved journal entry (data read by the caller). */
  readonly journal?: ReadonlyMap<string, Quarantined>;
  /** A blocking preflight failure: nothing is created meanwhile (what runs is kept). */
  readonly createBlock?: string | null;
  /**
   * The definitions cannot be read: keep what runs and start what exits;
   * no create, replace or remove. The operator's and the heals' steps go on.
   */
  readonly keptBecause?: string | null;
  /**
   * Containers without spcd labels under desired names (none of spcd's
   * runs there): nothing is created under such a name; the operator adopts
   * one, or removes it.
   */
  readonly unlabeled?: ReadonlyMap<string, UnlabeledFact>;
  /** Quarantined containers whose journal entry is to be tried again, and who asked. */
  readonly recover?: ReadonlyMap<string, RecoverOrigin>;
}

/**
 * Pure: (desired, observed, facts, now) -> steps. No I/O and no clock; the
 * reconciler executes the steps and calls again with what it then observes.
 * `desired` must be in start order (dependencies first). The operator's
 * intents, the heals a check asked for and the preflight block are inputs
 * too (in `facts` and `createBlock`), so every step of a pass comes from
 * here, a quarantine's retry included (`recover`). Outside it: journal
 * recovery and the sweep at start-up (docs/architecture.md).
 */
export function plan(input: PlanInput): Plan {
  const p = planAll(input);
  return restrict(p, (s) => waitsFor(s, input));
}

/** Why a step must wait (the preflight block, what runs kept while the definitions cannot be read), or undefined. */
function waitsFor(s: Step, input: PlanInput): string | undefined {
  const planned = s.kind === 'create' || s.kind === 'replace' || s.kind === 'remove';
  if (s.kind === 'create' && input.createBlock) return `preflight blocks: ${input.createBlock}`;
  if (planned && input.keptBecause) return `definitions not loaded: ${input.keptBecause}`;
  return undefined;
}

/** The origin of the steps the definitions ask for, and of the steps a failing check asks for. */
const PLAN = { by: 'plan' } as const;
const HEAL = { by: 'heal' } as const;

/** The container a step acts on. */
export function stepContainer(s: Step): string {
  if (s.kind === 'remove') return s.observed.identity.container;
  return s.kind === 'recover' ? s.container : s.desired.spec.name;
}

/** Keeps the steps `waits` has no reason for; the others wait, for that reason. */
export function restrict(p: Plan, waits: (s: Step) => string | undefined): Plan {
  const steps: Step[] = [];
  const waiting = [...p.waiting];
  for (const s of p.steps) {
    const why = waits(s);
    if (why === undefined) steps.push(s);
    else waiting.push({ container: stepContainer(s), reason: why });
  }
  return { ...p, steps, waiting };
}

/** The operator's request as a step; it goes before anything else planned for the container. */
function intentStep(
  intent: Intent,
  d: DesiredContainer,
  primary: ObservedContainer | undefined,
  unlabeled: UnlabeledFact | undefined,
): Step {
  const origin: OperatorOrigin = { by: 'operator', operation: intent.operation };
  const on = { desired: d, observed: primary, origin };
  switch (intent.verb) {
    case 'adopt':
      return {
        kind: 'adopt',
        desired: d,
        candidate: unlabeled,
        managed: primary,
        reason: 'adopt requested',
        origin,
      };
    case 'restart':
      return { kind: 'restart', ...on, reason: 'restart requested' };
    case 'stop':
      return { kind: 'stop', ...on, reason: 'stop requested' };
    case 'start':
      return { kind: 'start', ...on, reason: 'start requested' };
    case 'change':
      return { kind: 'upgrade', ...on, reason: `${intent.change} requested`, intent };
  }
}

/** The plan as it is drawn up: its steps, what waits and why, and the earliest time to look again. */
class Draft {
  readonly steps: Step[] = [];
  readonly waiting: { container: string; reason: string }[] = [];
  readonly untouched: { container: string; reason: string }[] = [];
  readonly adoptions: { container: string; blocked?: string }[] = [];
  private wakeAt: number | undefined;

  wait(container: string, reason: string): void {
    this.waiting.push({ container, reason });
  }

  wakeBy(at: number): void {
    this.wakeAt = min(this.wakeAt, at);
  }

  plan(): Plan {
    const { steps, waiting, untouched, adoptions, wakeAt } = this;
    return {
      steps,
      waiting,
      ...(untouched.length > 0 ? { untouched } : {}),
      ...(adoptions.length > 0 ? { adoptions } : {}),
      ...(wakeAt === undefined ? {} : { wakeAt }),
    };
  }
}

/** What every container's part of the plan reads. */
interface Pass {
  readonly input: PlanInput;
  readonly draft: Draft;
  readonly byName: Map<string, ObservedContainer[]>;
  readonly primaryOf: Map<string, ObservedContainer | undefined>;
  /** A quarantined container (unresolved journal entry) is left alone: see Quarantined. */
  quarantined(name: string): boolean;
}

function planAll(input: PlanInput): Plan {
  const draft = new Draft();
  const byName = groupByContainer(input.observed);
  const primaryOf = new Map<string, ObservedContainer | undefined>();
  for (const [name, list] of byName) primaryOf.set(name, pickPrimary(name, list));
  const quarantined = (name: string): boolean => {
    const q = input.journal?.get(name);
    if (q) draft.wait(name, q.reason);
    return q !== undefined;
  };
  const pass: Pass = { input, draft, byName, primaryOf, quarantined };
  planRecovers(input, draft);
  planDeleted(pass);
  for (const d of input.desired) planDesired(pass, d);
  return draft.plan();
}

/** A quarantined container asked to be tried again (and not locked): its journal entry, recovered. */
function planRecovers(input: PlanInput, draft: Draft): void {
  for (const [name, origin] of input.recover ?? []) {
    if (!input.journal?.has(name) || input.facts.get(name)?.busy) continue;
    draft.steps.push({ kind: 'recover', container: name, reason: 'journal entry tried again', origin });
  }
}

/**
 * Definitions deleted: stop and remove what carries our labels, and only that.
 * A removal that failed (e.g. refused while VMs run) waits for its backoff.
 */
function planDeleted({ input, draft, byName, quarantined }: Pass): void {
  const desiredNames = new Set(input.desired.map((d) => d.spec.name));
  for (const [name, list] of byName) {
    if (desiredNames.has(name)) continue;
    const facts = input.facts.get(name) ?? NO_FACTS;
    if (facts.busy || quarantined(name)) continue;
    if (facts.nextAttemptAt > input.now) {
      draft.wakeBy(facts.nextAttemptAt);
      draft.wait(name, 'removal waits for its backoff');
      continue;
    }
    for (const o of list)
      draft.steps.push({
        kind: 'remove',
        observed: o,
        reason: 'definition deleted',
        definitionDeleted: true,
        origin: PLAN,
      });
  }
}

/** One desired container: the operator's intent, strays, then create, replace, heal or start. */
function planDesired(pass: Pass, d: DesiredContainer): void {
  const { input, draft } = pass;
  const name = d.spec.name;
  const facts = input.facts.get(name) ?? NO_FACTS;
  if (facts.busy) return;
  const primary = pass.primaryOf.get(name);
  const unlabeled = primary ? undefined : input.unlabeled?.get(name);
  if (facts.intent) {
    draft.steps.push(intentStep(facts.intent, d, primary, unlabeled));
    return;
  }
  if (pass.quarantined(name)) return;

  // Strays (e.g. an old instance parked by an interrupted upgrade that the journal did not cover).
  for (const o of pass.byName.get(name) ?? []) {
    if (o !== primary)
      draft.steps.push({
        kind: 'remove',
        observed: o,
        reason: `extra instance of ${name}`,
        definitionDeleted: false,
        origin: PLAN,
      });
  }

  // A dependency counts once it runs and its checks passed (as Compose's service_healthy).
  const running = (dep: string): boolean => pass.primaryOf.get(dep)?.state === 'running';
  const depsDown = d.spec.dependsOn.filter((dep) => !running(dep) || input.facts.get(dep)?.ready === false);
  const c: Judged = { pass, d, name, facts, depsDown };

  if (!primary && unlabeled) {
    const blocked = adoptionBlock(unlabeled);
    draft.adoptions.push({ container: name, ...(blocked ? { blocked } : {}) });
    draft.wait(name, unlabeledReason(unlabeled));
    return;
  }
  if (!primary) {
    const reason = blockedStart(c);
    if (reason) draft.wait(name, reason);
    else draft.steps.push({ kind: 'create', desired: d, reason: 'not present', origin: PLAN });
    return;
  }
  if (planChange(c, primary)) return;
  if (isRunning(primary)) return planHeal(c, primary);
  const reason = blockedStart(c);
  if (reason) {
    draft.wait(name, reason);
  } else {
    draft.steps.push({
      kind: 'start',
      desired: d,
      observed: primary,
      reason: primary.state === 'created' ? 'created, not started' : `exited with ${primary.exitCode}`,
      origin: PLAN,
    });
  }
}

/** One desired container, its facts and the dependencies not yet up. */
interface Judged {
  readonly pass: Pass;
  readonly d: DesiredContainer;
  readonly name: string;
  readonly facts: RuntimeFacts;
  readonly depsDown: readonly string[];
}

/** Why nothing may be started now (create or restart alike); undefined when it may. */
function blockedStart({ pass, facts, depsDown }: Judged): string | undefined {
  if (facts.failed) return 'failed; needs an operator';
  if (facts.operatorStopped) return 'stopped by operator';
  if (depsDown.length > 0) return `waiting for ${depsDown.join(', ')}`;
  if (facts.nextAttemptAt > pass.input.now) {
    pass.draft.wakeBy(facts.nextAttemptAt);
    return 'backoff';
  }
  return undefined;
}

/** A definition that changed: replace it, or say why not. True when the change decided the container's part. */
function planChange({ pass, d, name, facts, depsDown }: Judged, primary: ObservedContainer): boolean {
  const { draft } = pass;
  const judged = judge(d, primary);
  // Labelled by a newer spcd: never replaced on a hash this spcd cannot read.
  // Starting it when it exits does not change it, so that still happens below.
  if (judged.kind === 'untouched') draft.untouched.push({ container: name, reason: judged.reason });
  let changed = judged.kind === 'changed' ? judged.reason : undefined;
  const failed = facts.failedTarget;
  if (changed && failed && failed.specHash === d.specHash && failed.configHash === d.configHash) {
    // The same target failed its upgrade and was rolled back: keep the old one until the definition changes.
    draft.wait(
      name,
      `${changed}, but generation ${failed.generation} of this definition failed and was rolled back; waiting for a new definition`,
    );
    changed = undefined;
  }
  const retryAt = facts.changeRetryAt ?? 0;
  if (changed && retryAt > pass.input.now) {
    // The last replacement failed (the engine, a refused hypervisor downgrade): not again before its backoff.
    draft.wakeBy(retryAt);
    draft.wait(name, `${changed}; the last try failed, tried again after its backoff`);
    changed = undefined;
  }
  if (!changed) return false;
  if (facts.operatorStopped && !isRunning(primary)) {
    draft.wait(name, `stopped by operator (${changed} pending)`);
  } else if (depsDown.length > 0) {
    draft.wait(name, `${changed}; waiting for ${depsDown.join(', ')}`);
  } else {
    draft.steps.push({ kind: 'replace', desired: d, observed: primary, reason: changed, origin: PLAN });
  }
  return true;
}

/** A failing check's heal: a stop when spcd gave up on it, else a restart within its backoff. */
function planHeal({ pass, d, name, facts }: Judged, primary: ObservedContainer): void {
  const { draft } = pass;
  if (!facts.heal) return;
  const heal = { desired: d, observed: primary, reason: facts.heal.reason, origin: HEAL };
  if (facts.failed) draft.steps.push({ kind: 'stop', ...heal });
  else if (facts.nextAttemptAt > pass.input.now) {
    draft.wakeBy(facts.nextAttemptAt);
    draft.wait(name, 'heal waits for its backoff');
  } else draft.steps.push({ kind: 'restart', ...heal });
}

/** What the plan says of an unlabeled container under a desired name. */
export function unlabeledReason(f: UnlabeledFact): string {
  const block = adoptionBlock(f);
  if (block) return `not adoptable: ${block}`;
  return "adopt: runs without spcd labels and matches its definition; spcd adopts it on the operator's word (spcctl adopt apply), creates nothing under its name meanwhile";
}

export type Judgement =
  | { readonly kind: 'same' }
  | { readonly kind: 'changed'; readonly reason: string }
  | { readonly kind: 'untouched'; readonly reason: string };

/**
 * Whether a container still matches its definition. Its labels are read
 * under the scheme they were written in (model/hash-schemes.ts), so a spcd
 * upgrade recreates nothing and an edit made after it still applies; a
 * scheme this spcd does not know says nothing about the spec (kubernetes#53644).
 */
export function judge(d: DesiredContainer, o: ObservedContainer): Judgement {
  const spec = compareSpecHash(o.identity.specHash, d.spec, d.specHash);
  if (spec.kind === 'unknown-scheme')
    return { kind: 'untouched', reason: unknownSchemeReason('spec', spec.scheme) };
  const config = compareConfigHash(o.identity.configHash, d.configHash);
  if (config.kind === 'unknown-scheme') {
    return { kind: 'untouched', reason: unknownSchemeReason('config', config.scheme) };
  }
  if (spec.kind === 'changed') return { kind: 'changed', reason: 'spec changed' };
  if (config.kind === 'changed') return { kind: 'changed', reason: 'config changed' };
  return { kind: 'same' };
}

function groupByContainer(observed: readonly ObservedContainer[]): Map<string, ObservedContainer[]> {
  const m = new Map<string, ObservedContainer[]>();
  for (const o of observed) {
    const k = o.identity.container;
    const list = m.get(k);
    if (list) list.push(o);
    else m.set(k, [o]);
  }
  return m;
}

/** The instance that *is* the container: the one under its stable name, else the newest running, else the newest. */
export function pickPrimary(name: string, list: readonly ObservedContainer[]): ObservedContainer | undefined {
  const named = list.find((o) => o.name === name);
  if (named) return named;
  const newest = [...list].sort((a, b) => b.identity.generation - a.identity.generation);
  return newest.find(isRunning) ?? newest[0];
}

function min(a: number | undefined, b: number): number {
  return a === undefined ? b : Math.min(a, b);
}
