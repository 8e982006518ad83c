import { compareConfigHash, compareSpecHash, unknownSchemeReason } from '../model/hash-schemes.js';
import { adoptionBlock, type UnlabeledFact } from '../model/adoption.js';
import { isRunning, type ObservedContainer } from '../model/observed.js';
import {
  NO_FACTS,
  type DesiredContainer,
  type Intent,
  type JournalHold,
  type Plan,
  type RuntimeFacts,
  type Step,
} from './types.js';

export interface PlanInput {
  readonly desired: readonly DesiredContainer[];
  readonly observed: readonly ObservedContainer[];
  readonly facts: ReadonlyMap<string, RuntimeFacts>;
  readonly now: number;
  /** Containers with an unresolved journal entry (data read by the caller). */
  readonly journal?: ReadonlyMap<string, JournalHold>;
  /** A blocking preflight failure: nothing is created meanwhile (what runs is kept). */
  readonly createBlock?: string | null;
  /**
   * The definitions cannot be read: keep what runs and start what exits;
   * no create, replace or remove. The operator's and the heals' steps go on.
   */
  readonly hold?: string | null;
  /**
   * Containers without spcd labels under desired names (none of spcd's
   * runs there): nothing is created under such a name; the operator adopts
   * one, or removes it.
   */
  readonly unlabeled?: ReadonlyMap<string, UnlabeledFact>;
}

/**
 * Pure: (desired, observed, facts, now) -> steps. No I/O and no clock; the
 * reconciler executes the steps and calls again with what it then observes.
 * `desired` must be in start order (dependencies first). The operator's
 * intents, the heals a check asked for and the preflight block are inputs
 * too (in `facts` and `createBlock`), so every step spcd takes comes from here.
 */
export function plan(input: PlanInput): Plan {
  const p = planAll(input);
  return restrict(p, (s) => waitsFor(s, input));
}

/** Why a step must wait (the preflight block, a definitions hold), or undefined. */
function waitsFor(s: Step, input: PlanInput): string | undefined {
  const planned = s.kind === 'create' || s.kind === 'replace' || s.kind === 'remove';
  if (s.kind === 'create' && input.createBlock) return `preflight blocks: ${input.createBlock}`;
  if (planned && input.hold) return `definitions not loaded: ${input.hold}`;
  return undefined;
}

/** The container a step acts on. */
export function stepContainer(s: Step): string {
  return s.kind === 'remove' ? s.observed.identity.container : s.desired.spec.name;
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
  const operation = intent.operation;
  switch (intent.verb) {
    case 'adopt':
      return {
        kind: 'adopt',
        desired: d,
        candidate: unlabeled,
        managed: primary,
        reason: 'adopt requested',
        operation,
      };
    case 'restart':
      return { kind: 'restart', desired: d, observed: primary, reason: 'restart requested', operation };
    case 'stop':
      return { kind: 'stop', desired: d, observed: primary, reason: 'stop requested', operation };
    case 'start':
      return { kind: 'start', desired: d, observed: primary, reason: 'start requested', operation };
    case 'change':
      return { kind: 'upgrade', desired: d, observed: primary, reason: `${intent.change} requested`, intent };
  }
}

function planAll(input: PlanInput): Plan {
  const steps: Step[] = [];
  const waiting: { container: string; reason: string }[] = [];
  const untouched: { container: string; reason: string }[] = [];
  const adoptions: { container: string; blocked?: string }[] = [];
  let wakeAt: number | undefined;
  const byName = groupByContainer(input.observed);
  const desiredNames = new Set(input.desired.map((d) => d.spec.name));
  const primaryOf = new Map<string, ObservedContainer | undefined>();

  for (const [name, list] of byName) primaryOf.set(name, pickPrimary(name, list));
  // A quarantined container (unresolved journal entry) is left alone: see JournalHold.
  const held = (name: string): boolean => {
    const hold = input.journal?.get(name);
    if (hold) waiting.push({ container: name, reason: hold.reason });
    return hold !== undefined;
  };

  // Definitions deleted: stop and remove what carries our labels, and only that.
  // A removal that failed (e.g. refused while VMs run) waits for its backoff.
  for (const [name, list] of byName) {
    if (desiredNames.has(name)) continue;
    const facts = input.facts.get(name) ?? NO_FACTS;
    if (facts.busy || held(name)) continue;
    if (facts.nextAttemptAt > input.now) {
      wakeAt = min(wakeAt, facts.nextAttemptAt);
      waiting.push({ container: name, reason: 'removal waits for its backoff' });
      continue;
    }
    for (const o of list)
      steps.push({ kind: 'remove', observed: o, reason: 'definition deleted', definitionDeleted: true });
  }

  const running = (name: string): boolean => {
    const p = primaryOf.get(name);
    return p !== undefined && p.state === 'running';
  };

  for (const d of input.desired) {
    const name = d.spec.name;
    const facts = input.facts.get(name) ?? NO_FACTS;
    if (facts.busy) continue;
    const primary = primaryOf.get(name);
    const unlabeled = primary ? undefined : input.unlabeled?.get(name);
    if (facts.intent) {
      steps.push(intentStep(facts.intent, d, primary, unlabeled));
      continue;
    }
    if (held(name)) continue;
    const list = byName.get(name) ?? [];

    // Strays (e.g. an old instance parked by an interrupted upgrade that the journal did not cover).
    for (const o of list) {
      if (o !== primary)
        steps.push({
          kind: 'remove',
          observed: o,
          reason: `extra instance of ${name}`,
          definitionDeleted: false,
        });
    }

    // A dependency counts once it runs and its checks passed (as Compose's service_healthy).
    const depsDown = d.spec.dependsOn.filter((dep) => !running(dep) || input.facts.get(dep)?.ready === false);

    // Why nothing may be started now (create or restart alike); undefined when it may.
    const blocked = (): string | undefined => {
      if (facts.failed) return 'failed; needs an operator';
      if (facts.heldStopped) return 'stopped by operator';
      if (depsDown.length > 0) return `waiting for ${depsDown.join(', ')}`;
      if (facts.nextAttemptAt > input.now) {
        wakeAt = min(wakeAt, facts.nextAttemptAt);
        return 'backoff';
      }
      return undefined;
    };

    if (!primary && unlabeled) {
      const blocked = adoptionBlock(unlabeled);
      adoptions.push({ container: name, ...(blocked ? { blocked } : {}) });
      waiting.push({ container: name, reason: unlabeledReason(unlabeled) });
      continue;
    }
    if (!primary) {
      const reason = blocked();
      if (reason) waiting.push({ container: name, reason });
      else steps.push({ kind: 'create', desired: d, reason: 'not present' });
      continue;
    }

    const judged = judge(d, primary);
    // Labelled by a newer spcd: never replaced on a hash this spcd cannot read.
    // Starting it when it exits does not change it, so that still happens below.
    if (judged.kind === 'untouched') untouched.push({ container: name, reason: judged.reason });
    let changed = judged.kind === 'changed' ? judged.reason : undefined;
    const failed = facts.failedTarget;
    if (changed && failed && failed.specHash === d.specHash && failed.configHash === d.configHash) {
      // The same target failed its upgrade and was rolled back: keep the old one until the definition changes.
      waiting.push({
        container: name,
        reason: `${changed}, but generation ${failed.generation} of this definition failed and was rolled back; waiting for a new definition`,
      });
      changed = undefined;
    }
    if (changed) {
      if (facts.heldStopped && !isRunning(primary)) {
        waiting.push({ container: name, reason: `stopped by operator (${changed} pending)` });
      } else if (depsDown.length > 0) {
        waiting.push({ container: name, reason: `${changed}; waiting for ${depsDown.join(', ')}` });
      } else {
        steps.push({ kind: 'replace', desired: d, observed: primary, reason: changed });
      }
      continue;
    }

    if (isRunning(primary)) {
      // A failing check's heal: a stop when spcd gave up on it, else a restart within its backoff.
      if (!facts.heal) continue;
      if (facts.failed)
        steps.push({ kind: 'stop', desired: d, observed: primary, reason: facts.heal.reason });
      else if (facts.nextAttemptAt > input.now) {
        wakeAt = min(wakeAt, facts.nextAttemptAt);
        waiting.push({ container: name, reason: 'heal waits for its backoff' });
      } else steps.push({ kind: 'restart', desired: d, observed: primary, reason: facts.heal.reason });
      continue;
    }
    const reason = blocked();
    if (reason) {
      waiting.push({ container: name, reason });
    } else {
      steps.push({
        kind: 'start',
        desired: d,
        observed: primary,
        reason: primary.state === 'created' ? 'created, not started' : `exited with ${primary.exitCode}`,
      });
    }
  }
  return {
    steps,
    waiting,
    ...(untouched.length > 0 ? { untouched } : {}),
    ...(adoptions.length > 0 ? { adoptions } : {}),
    ...(wakeAt === undefined ? {} : { wakeAt }),
  };
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
