import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { Journal, type JournalEntry } from '../../agent/state/journal.js';

let dir: string;
let journal: Journal;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spcd-journal-'));
  journal = new Journal(dir);
  await journal.init();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const entry = (container: string): JournalEntry => ({
  operationId: 'op',
  kind: 'recreate',
  container,
  fromGeneration: 1,
  toGeneration: 2,
  oldId: 'old',
  newId: 'new',
  stagingName: `${container}.g2.new`,
  parkedName: `${container}.g1.old`,
  step: 'gating',
  startedAt: '2026-01-01T00:00:00Z',
});

describe('journal scan', () => {
  it('returns the good entries and names each malformed file with its container, never throwing', async () => {
    await journal.write(entry('good/one'));
    await writeFile(journal.fileOf('torn'), '{"container": "to');
    await writeFile(
      journal.fileOf('wrong-step'),
      JSON.stringify({ ...entry('wrong-step'), step: 'dancing' }),
    );
    await writeFile(journal.fileOf('other-name'), JSON.stringify(entry('someone-else')));
    const { entries, malformed } = await journal.scan();
    expect(entries.map((e) => e.container)).toEqual(['good/one']);
    expect(malformed.map((m) => [m.container, m.file])).toEqual([
      ['other-name', journal.fileOf('other-name')],
      ['torn', journal.fileOf('torn')],
      ['wrong-step', journal.fileOf('wrong-step')],
    ]);
    expect(malformed.map((m) => m.reason)).toEqual([
      expect.stringMatching(/names container "someone-else", not other-name/),
      expect.stringMatching(/not valid JSON/),
      expect.stringMatching(/unknown step "dancing"/),
    ]);
  });

  it('read() refuses a malformed entry with STATE_CORRUPT naming the file', async () => {
    await writeFile(journal.fileOf('x'), JSON.stringify({ ...entry('x'), toGeneration: 'two' }));
    const err = await journal.read('x').catch((e: unknown) => e);
    expect(isSpcdError(err, 'STATE_CORRUPT')).toBe(true);
    expect((err as Error).message).toContain(journal.fileOf('x'));
    expect(await journal.read('absent')).toBeUndefined();
  });

  it('keeps an undo-only mark, and refuses one that is no string', async () => {
    await journal.write({ ...entry('marked'), mustUndo: 'rolled back: amqp failed' });
    expect(await journal.read('marked')).toMatchObject({ mustUndo: 'rolled back: amqp failed' });
    await writeFile(journal.fileOf('bad-mark'), JSON.stringify({ ...entry('bad-mark'), mustUndo: true }));
    expect(isSpcdError(await journal.read('bad-mark').catch((e: unknown) => e), 'STATE_CORRUPT')).toBe(true);
  });
});
