import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { SpcdError } from '../errors.js';
import { ensureDir, fsyncDir, readJsonFile, writeFileAtomic } from './atomic.js';

/**
 * The steps of the upgrade transaction, in order. The journal names the last
 * step *begun*. Recovery undoes everything up to and including 'gating' (the
 * new generation never proved itself) and finishes 'committing'.
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

  async read(container: string): Promise<JournalEntry | undefined> {
    return (await readJsonFile(this.file(container))) as JournalEntry | undefined;
  }

  async all(): Promise<JournalEntry[]> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
    const out: JournalEntry[] = [];
    for (const n of names) {
      const e = (await readJsonFile(join(this.dir, n))) as JournalEntry | undefined;
      if (!e) continue;
      if (typeof e.container !== 'string' || !UPGRADE_STEPS.includes(e.step)) {
        throw new SpcdError('STATE_CORRUPT', `journal entry ${n} is malformed`, { file: n });
      }
      out.push(e);
    }
    return out;
  }

  async isClean(): Promise<boolean> {
    return (await this.all()).length === 0;
  }
}
