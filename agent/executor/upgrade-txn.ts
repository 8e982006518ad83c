import type { ObservedContainer } from '../model/observed.js';
import type { Identity } from '../model/labels.js';
import type { JournalEntry, UpgradeStep } from '../state/journal.js';
import type { ResolvedImage } from './image.js';
import type { ExecutorDeps, PreparedExtras } from './ports.js';
import type { OldStopped } from './stop-old.js';
import type { UpgradeRequest } from './upgrade.js';

export const stagingName = (name: string, gen: number): string => `${name}.g${gen}.new`;
export const parkedName = (name: string, gen: number): string => `${name}.g${gen}.old`;

export type StepOutcome = 'begin' | 'done' | 'failed';

/** One upgrade transaction: what every phase reads, and how it reports its steps. */
export interface Txn {
  readonly deps: ExecutorDeps;
  readonly req: UpgradeRequest;
  readonly name: string;
  /** The instance it replaces; undefined when there is none. */
  readonly old: ObservedContainer | undefined;
  readonly oldGen: number | null;
  step(s: string, generation: number, outcome: StepOutcome, detail?: string): void;
}

export function openTxn(deps: ExecutorDeps, req: UpgradeRequest): Txn {
  const name = req.spec.name;
  const old = req.current;
  return {
    deps,
    req,
    name,
    old,
    oldGen: old?.identity.generation ?? null,
    step: (s, generation, outcome, detail) =>
      deps.events.publish({
        type: 'upgrade-step',
        at: deps.clock.now(),
        operationId: req.operationId,
        container: name,
        step: s,
        generation,
        outcome,
        ...(detail !== undefined ? { detail } : {}),
      }),
  };
}

/** What the prepare phase leaves: generation N allocated, its mounts and bootstrap done; nothing running touched. */
export interface Prepared {
  readonly image: ResolvedImage;
  readonly pullMs: number;
  readonly warnings: readonly string[];
  readonly extras: PreparedExtras;
  readonly generation: number;
  readonly identity: Identity;
  readonly entryBase: Omit<JournalEntry, 'newId' | 'step'>;
}

/** The transaction's journal entry: each step is written before it begins. */
export class TxnJournal {
  private current: JournalEntry;

  constructor(
    private readonly deps: Pick<ExecutorDeps, 'journal'>,
    private readonly base: Omit<JournalEntry, 'newId' | 'step'>,
  ) {
    this.current = { ...base, newId: null, step: 'creating' };
  }

  get entry(): JournalEntry {
    return this.current;
  }

  async begin(step: UpgradeStep, newId: string | null): Promise<void> {
    this.current = { ...this.base, newId, step };
    await this.deps.journal.write(this.current);
  }

  /** The step begun stays; the entry may only be undone from now on (recovery never rolls it forward). */
  async mustUndo(reason: string): Promise<void> {
    this.current = { ...this.current, mustUndo: reason };
    await this.deps.journal.write(this.current);
  }
}

/** The window's clock marks, and the old instance's stop while it is still settling. */
export interface Window {
  stopAt: number;
  runningAt: number;
  oldStopped?: OldStopped;
}
