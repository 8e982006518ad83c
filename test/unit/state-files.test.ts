import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { nodeStateFs, type StateFs } from '../../agent/state/atomic.js';
import { StateStore } from '../../agent/state/store.js';
import { StateDirLock } from '../../agent/state/lock.js';
import { Journal } from '../../agent/state/journal.js';
import { generationEntry } from '../support/state-entry.js';

/**
 * state.json on the real file system: every way a file can be unusable is
 * named (file and field) and set aside, and a write that fails or is cut
 * short by a crash never tears the file (test/unit/state-store.test.ts
 * injects ENOSPC; here the failures are the file system's own).
 */
const NOW = new Date('2026-11-24T05:00:00.000Z');
const good = { nextGeneration: 2, lastKnownGood: 1, heldStopped: false, generations: [] };

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-state-files-'));
  path = join(dir, 'state.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('an unusable state.json names the file and the field', () => {
  const cases: { name: string; file: unknown; field: string; what: string }[] = [
    { name: 'a list', file: [], field: '(top level)', what: 'is not an object' },
    { name: 'another version', file: { version: 2, containers: {} }, field: 'version', what: 'is not 1' },
    { name: 'no containers', file: { version: 1 }, field: 'containers', what: 'is not an object' },
    {
      name: 'a record that is no object',
      file: { version: 1, containers: { api: 'x' } },
      field: 'containers.api',
      what: 'is not an object',
    },
    {
      name: 'a fractional nextGeneration',
      file: { version: 1, containers: { api: { ...good, nextGeneration: 1.5 } } },
      field: 'containers.api.nextGeneration',
      what: 'is not a positive integer',
    },
    {
      name: 'a lastKnownGood of 0',
      file: { version: 1, containers: { api: { ...good, lastKnownGood: 0 } } },
      field: 'containers.api.lastKnownGood',
      what: 'is neither null nor a positive integer',
    },
    {
      name: 'heldStopped as a string',
      file: { version: 1, containers: { api: { ...good, heldStopped: 'yes' } } },
      field: 'containers.api.heldStopped',
      what: 'is not a boolean',
    },
    {
      name: 'generations as an object',
      file: { version: 1, containers: { api: { ...good, generations: {} } } },
      field: 'containers.api.generations',
      what: 'is not a list',
    },
    {
      name: 'a generation without its spec',
      file: {
        version: 1,
        containers: {
          api: {
            ...good,
            generations: [
              { ...generationEntry('img:1'), generation: 1, outcome: 'current' },
              { generation: 2 },
            ],
          },
        },
      },
      field: 'containers.api.generations[1]',
      what: 'lacks generation, outcome or spec',
    },
  ];
  for (const c of cases) {
    it(`${c.name}: set aside, "${c.field} ${c.what}"`, async () => {
      const text = JSON.stringify(c.file);
      writeFileSync(path, text);
      const store = new StateStore(dir);
      const rec = await store.load(NOW);
      expect(rec?.reason).toContain(`${path}: ${c.field} ${c.what}`);
      expect(rec?.movedTo).toBe(`${path}.corrupt-2026-11-24T05-00-00-000Z`);
      expect(readFileSync(rec!.movedTo!, 'utf8')).toBe(text);
      expect(store.names()).toEqual([]);
      expect(store.needsRebuild()).toBe(true);
    });
  }

  it('a state.json that cannot be read (a directory) is named and set aside', async () => {
    mkdirSync(path);
    const store = new StateStore(dir);
    const rec = await store.load(NOW);
    expect(rec?.reason).toMatch(new RegExp(`^cannot read ${path}: EISDIR`));
    expect(rec?.movedTo).toBe(`${path}.corrupt-2026-11-24T05-00-00-000Z`);
    expect(readdirSync(dir)).not.toContain('state.json');
  });

  it('when it cannot be set aside either, spcd still starts empty and says where the file is', async () => {
    writeFileSync(path, '{"version":1,');
    const stuck: StateFs = {
      ...nodeStateFs,
      moveAside: async () => {
        throw Object.assign(new Error('EROFS: read-only file system, rename'), { code: 'EROFS' });
      },
    };
    const store = new StateStore(dir, stuck);
    const rec = await store.load(NOW);
    expect(rec).toMatchObject({ movedTo: null });
    expect(rec?.reason).toContain(`${path} is not valid JSON`);
    expect(store.names()).toEqual([]);
    // The bad file is still there for the operator, unchanged.
    expect(readFileSync(path, 'utf8')).toBe('{"version":1,');
  });
});

describe('a state write never tears state.json', () => {
  it('a write the file system refuses: STATE_WRITE_FAILED naming the file and errno, no temp left, memory unchanged', async () => {
    const store = new StateStore(dir);
    await store.load(NOW);
    await store.allocate('api', generationEntry('img:1'), NOW);
    const before = readFileSync(path, 'utf8');
    // The rename over state.json fails: it became a directory with something in it.
    rmSync(path);
    mkdirSync(join(path, 'in-the-way'), { recursive: true });
    const err = await store.allocate('api', generationEntry('img:2'), NOW).catch((e: unknown) => e);
    expect(isSpcdError(err, 'STATE_WRITE_FAILED')).toBe(true);
    expect((err as Error).message).toContain(`cannot write ${path}`);
    expect((err as { details: Record<string, unknown> }).details).toMatchObject({ path });
    expect((err as { details: Record<string, unknown> }).details.errno).toMatch(/^E[A-Z]+$/);
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    // Memory was not changed by the failed write: the next number is still 2.
    expect(store.record('api')?.nextGeneration).toBe(2);
    rmSync(path, { recursive: true });
    writeFileSync(path, before);
    expect((await store.allocate('api', generationEntry('img:2'), NOW)).generation).toBe(2);
  });

  it('a crash in the middle of a write leaves the last whole file and a temp file that is ignored', async () => {
    const first = new StateStore(dir);
    await first.load(NOW);
    await first.allocate('api', generationEntry('img:1'), NOW);
    const whole = readFileSync(path, 'utf8');
    // What writeFileAtomic leaves when the process dies before its rename: a torn temp file beside.
    writeFileSync(join(dir, '.state.json.0a1b2c3d4e5f.tmp'), whole.slice(0, whole.length / 2));
    const next = new StateStore(dir);
    expect(await next.load(NOW)).toBeUndefined();
    expect(next.record('api')).toMatchObject({ nextGeneration: 2 });
    expect(next.generation('api', 1)?.image).toBe('img:1');
    await next.allocate('api', generationEntry('img:2'), NOW);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({
      containers: { api: { nextGeneration: 3 } },
    });
  });
});

describe('a state folder that cannot be one', () => {
  it('a regular file where the state folder should be: STATE_WRITE_FAILED naming the folder, not a bare EEXIST', async () => {
    const blocked = join(dir, 'not-a-folder');
    writeFileSync(blocked, 'x');
    const err: unknown = await new StateDirLock(blocked).acquire().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err) && err.code).toBe('STATE_WRITE_FAILED');
    expect(isSpcdError(err) && err.details).toMatchObject({ path: blocked, errno: 'EEXIST' });
    expect((err as Error).message).toContain(`cannot create the state folder ${blocked}`);
    expect(readFileSync(blocked, 'utf8')).toBe('x');
  });

  it('a file in the way of a parent folder: named the same way (ENOTDIR)', async () => {
    writeFileSync(join(dir, 'file'), 'x');
    const below = join(dir, 'file', 'journal');
    const err: unknown = await new Journal(join(dir, 'file')).init().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err) && err.code).toBe('STATE_WRITE_FAILED');
    expect(isSpcdError(err) && err.details).toMatchObject({ path: below });
  });
});
