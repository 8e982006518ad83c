import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import { ensureDir, fsyncDir, readJsonFile, writeFileAtomic } from './atomic.js';

/**
 * The steps of the upgrade transaction, in order. The journal names the last
 * step *begun*. Recovery undoes everything before 'starting-new', rolls
 * 'starting-new' and 'gating' forward when the new generation runs and passes
 * its gate (else undoes them), and finishes 'committing' (recover.ts).
 */
export const UPGRADE_STEPS = [
  'creating',
  'renaming',
  'stopping-old',
  'starting-new',
  'gating',
  'committing',
] as const;
export type UpgradeStep = (typeof UPGRADE_STEPS)[number];

/** The steps after which the new generation may be running: recovery may roll them forward. */
export const STARTED_STEPS: readonly UpgradeStep[] = ['starting-new', 'gating'];

export interface JournalEntry {
  readonly operationId: string;
  readonly kind: 'upgrade' | 'recreate' | 'rollback' | 'create';
  readonly container: string;
  readonly fromGeneration: number | null;
  readonly toGeneration: number;
  readonly oldId: string | null;
  readonly newId: string | null;
  /** The docker name the new container was created under before the swap. */
  readonly stagingName: string;
  /** The docker name the old container is parked under after the swap. */
  readonly parkedName: string;
  readonly step: UpgradeStep;
  readonly startedAt: string;
  /**
   * Set when the entry may only be undone, never rolled forward: its gate
   * failed (the transaction's rollback began), or a recovery began a gate on
   * it that did not end. The reason, for the log and the generation's record.
   */
  readonly mustUndo?: string;
  /**
   * An operator's change: at commit, whoever commits (the transaction or a
   * recovery), the generation's spec is pinned over the definitions (their
   * hash when it was asked for), or, `'clear'`, an earlier pin dropped (the
   * change matches the definitions). With the commit, so that a recovery
   * that rolls the change forward keeps it.
   */
  readonly pin?: { readonly definitionHash: string } | 'clear';
}

/**
 * Write-ahead intent for operations that touch more than one container. One
 * file per container; written atomically before each step; removed on commit
 * or after rollback. On start, whatever is left is finished or undone.
 */
export class Journal {
  private readonly dir: string;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'journal');
  }

  async init(): Promise<void> {
    await ensureDir(this.dir);
  }

  private file(container: string): string {
    return join(this.dir, `${encodeURIComponent(container)}.json`);
  }

  async write(entry: JournalEntry): Promise<void> {
    await writeFileAtomic(this.file(entry.container), JSON.stringify(entry));
  }

  async clear(container: string): Promise<void> {
    try {
      await unlink(this.file(container));
      await fsyncDir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  /** The container's entry; undefined when none, STATE_CORRUPT when its file is no valid entry. */
  read(container: string): Promise<JournalEntry | undefined> {
    return readEntry(this.file(container), container);
  }

  /**
   * Every entry, and apart from them the files that cannot be one (unreadable,
   * not JSON, missing fields). A bad file never hides the good ones: recovery
   * quarantines its container and goes on with the rest.
   */
  async scan(): Promise<{ entries: JournalEntry[]; malformed: MalformedEntry[] }> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
    const entries: JournalEntry[] = [];
    const malformed: MalformedEntry[] = [];
    for (const n of names.sort()) {
      const file = join(this.dir, n);
      const container = containerOfFile(n);
      try {
        const e = await readEntry(file, container);
        if (e) entries.push(e);
      } catch (err) {
        malformed.push({ file, container, reason: (err as Error).message });
      }
    }
    return { entries, malformed };
  }

  /** The file that holds a container's entry (for messages and for operators). */
  fileOf(container: string): string {
    return this.file(container);
  }
}

/** A journal file that is not a valid entry; `container` comes from the file name. */
export interface MalformedEntry {
  readonly file: string;
  readonly container: string;
  readonly reason: string;
}

function containerOfFile(n: string): string {
  const base = n.slice(0, -'.json'.length);
  try {
    return decodeURIComponent(base);
  } catch {
    return base;
  }
}

async function readEntry(file: string, container: string): Promise<JournalEntry | undefined> {
  const e = await readJsonFile(file);
  if (e === undefined) return undefined;
  const problem = entryProblem(e, container);
  if (problem) throw new SpcdError('STATE_CORRUPT', `journal entry ${file} ${problem}`, { file });
  return e as JournalEntry;
}

/** What makes a parsed file unusable as an entry of `container`; undefined when it is usable. */
function entryProblem(e: unknown, container: string): string | undefined {
  if (typeof e !== 'object' || e === null) return 'is not an object';
  const x = e as Record<string, unknown>;
  if (x.container !== container) return `names container ${JSON.stringify(x.container)}, not ${container}`;
  if (!UPGRADE_STEPS.includes(x.step as UpgradeStep)) return `has an unknown step ${JSON.stringify(x.step)}`;
  if (typeof x.toGeneration !== 'number') return 'has no toGeneration';
  for (const k of ['oldId', 'newId'] as const)
    if (x[k] !== null && typeof x[k] !== 'string') return `has a bad ${k}`;
  for (const k of ['stagingName', 'parkedName'] as const) if (typeof x[k] !== 'string') return `has no ${k}`;
  if (x.mustUndo !== undefined && typeof x.mustUndo !== 'string') return 'has a bad mustUndo';
  return undefined;
}
