import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { nodeStateFs, type StateFs } from '../../agent/state/atomic.js';
import { StateStore } from '../../agent/state/store.js';
import { generationEntry } from '../support/state-entry.js';

/** The real file system, except that chosen writes fail the way a full disk fails them. */
class FailingFs implements StateFs {
  writes = 0;
  readonly failing = new Set<number>();
  ensureDir = nodeStateFs.ensureDir;
  readJsonFile = nodeStateFs.readJsonFile;
  moveAside = nodeStateFs.moveAside;

  async writeFileAtomic(path: string, data: string): Promise<void> {
    this.writes += 1;
    if (this.failing.has(this.writes)) {
      throw Object.assign(new Error(`ENOSPC: no space left on device, write`), {
        code: 'ENOSPC',
        errno: -28,
      });
    }
    await nodeStateFs.writeFileAtomic(path, data);
  }
}

const NOW = new Date('2026-11-23T10:00:00.000Z');

let dir: string;
let fs: FailingFs;
const onDisk = (): unknown => JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'));
const reopen = async (): Promise<StateStore> => {
  const s = new StateStore(dir);
  expect(await s.load()).toBeUndefined();
  return s;
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-state-unit-'));
  fs = new FailingFs();
});

describe('state store: a failed write changes nothing', () => {
  it("a stop whose write fails leaves memory unchanged, and its retry persists the operator's stop", async () => {
    const store = new StateStore(dir, fs);
    await store.load();
    await store.allocate('api', generationEntry('img:1'), NOW); // write 1
    fs.failing.add(2);
    const err = await store.setOperatorStopped('api', true).catch((e: unknown) => e);
    expect(isSpcdError(err, 'STATE_WRITE_FAILED')).toBe(true);
    expect((err as { details: unknown }).details).toEqual({ path: join(dir, 'state.json'), errno: 'ENOSPC' });
    expect(store.record('api')?.heldStopped).toBe(false);
    expect((await reopen()).record('api')?.heldStopped).toBe(false);

    await store.setOperatorStopped('api', true); // the retry writes (write 3)
    expect(fs.writes).toBe(3);
    expect(store.record('api')?.heldStopped).toBe(true);
    expect((await reopen()).record('api')?.heldStopped).toBe(true);
  });

  it('a failed allocation hands out no number and records no generation', async () => {
    const store = new StateStore(dir, fs);
    await store.load();
    await store.allocate('api', generationEntry('img:1'), NOW);
    fs.failing.add(2);
    await expect(store.allocate('api', generationEntry('img:2'), NOW)).rejects.toMatchObject({
      code: 'STATE_WRITE_FAILED',
    });
    expect(store.record('api')?.nextGeneration).toBe(2);
    expect(store.record('api')?.generations.map((g) => g.generation)).toEqual([1]);
    const g = await store.allocate('api', generationEntry('img:2'), NOW);
    expect(g.generation).toBe(2);
    expect((await reopen()).record('api')?.generations.map((x) => x.image)).toEqual(['img:1', 'img:2']);
  });

  it('a failed commit keeps the previous current and last known good', async () => {
    const store = new StateStore(dir, fs);
    await store.load();
    await store.allocate('api', generationEntry('img:1'), NOW);
    await store.commit('api', 1);
    await store.allocate('api', generationEntry('img:2'), NOW);
    fs.failing.add(4);
    await expect(store.commit('api', 2)).rejects.toMatchObject({ code: 'STATE_WRITE_FAILED' });
    expect(store.record('api')?.lastKnownGood).toBe(1);
    expect(store.generation('api', 1)?.outcome).toBe('current');
    expect(store.generation('api', 2)?.outcome).toBe('in-progress');
    expect(onDisk()).toMatchObject({ containers: { api: { lastKnownGood: 1 } } });
  });

  it('changes issued together are all persisted, each on top of the one before', async () => {
    const store = new StateStore(dir, fs);
    await store.load();
    fs.failing.add(2);
    const results = await Promise.allSettled([
      store.allocate('a', generationEntry('img:a'), NOW),
      store.allocate('b', generationEntry('img:b'), NOW),
      store.setOperatorStopped('c', true),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const again = await reopen();
    expect(again.names().sort()).toEqual(['a', 'c']);
    expect(again.record('c')?.heldStopped).toBe(true);
    expect(store.names().sort()).toEqual(['a', 'c']);
  });
});

describe('state store: an unusable state.json at start-up', () => {
  it('is moved aside and kept; spcd starts empty and says so', async () => {
    writeFileSync(join(dir, 'state.json'), '{"version":1,"containers":{"api":');
    const store = new StateStore(dir, fs);
    const rec = await store.load(NOW);
    expect(rec).toMatchObject({
      at: NOW.toISOString(),
      movedTo: join(dir, 'state.json.corrupt-2026-11-23T10-00-00-000Z'),
    });
    expect(rec?.reason).toContain('not valid JSON');
    expect(readFileSync(rec!.movedTo!, 'utf8')).toBe('{"version":1,"containers":{"api":');
    expect(readdirSync(dir)).not.toContain('state.json');
    expect(store.needsRebuild()).toBe(true);
    expect(store.names()).toEqual([]);
    expect(store.recovery()).toBe(rec);
  });

  it('names the field when the JSON is not a state file', async () => {
    writeFileSync(
      join(dir, 'state.json'),
      JSON.stringify({ version: 1, containers: { api: { nextGeneration: 0 } } }),
    );
    const store = new StateStore(dir, fs);
    const rec = await store.load(NOW);
    expect(rec?.reason).toContain('containers.api.nextGeneration is not a positive integer');
    expect(store.needsRebuild()).toBe(true);
  });

  it('a readable file is not a recovery', async () => {
    const first = new StateStore(dir, fs);
    await first.load();
    await first.allocate('api', generationEntry('img:1'), NOW);
    const store = new StateStore(dir, fs);
    expect(await store.load(NOW)).toBeUndefined();
    expect(store.needsRebuild()).toBe(false);
    expect(store.record('api')?.nextGeneration).toBe(2);
  });

  it('rebuilds generations and last known good from labels; numbers seen are never reused', async () => {
    writeFileSync(join(dir, 'state.json'), 'garbage');
    const store = new StateStore(dir, fs);
    await store.load(NOW);
    const running = { ...generationEntry('img:7'), generation: 7, createdAt: NOW.toISOString() };
    await store.rebuild(
      [
        { name: 'api', maxGeneration: 9, runningGeneration: 7, running },
        { name: 'web', maxGeneration: 5, runningGeneration: 5 },
        { name: 'db', maxGeneration: 3 },
      ],
      NOW,
    );
    expect(store.needsRebuild()).toBe(false);
    expect(store.recovery()?.rebuilt).toEqual(['api', 'web', 'db']);
    const again = await reopen();
    expect(again.record('api')).toMatchObject({ nextGeneration: 10, lastKnownGood: 7 });
    expect(again.generation('api', 7)?.outcome).toBe('current');
    expect(again.record('web')).toMatchObject({ nextGeneration: 6, lastKnownGood: 5, generations: [] });
    expect(again.record('db')).toMatchObject({ nextGeneration: 4, lastKnownGood: null, generations: [] });
    expect((await store.allocate('api', generationEntry('img:8'), NOW)).generation).toBe(10);
  });

  it('a rebuild whose write fails still keeps seen numbers from being handed out', async () => {
    writeFileSync(join(dir, 'state.json'), 'garbage');
    const store = new StateStore(dir, fs);
    await store.load(NOW);
    fs.failing.add(1);
    await expect(store.rebuild([{ name: 'api', maxGeneration: 12 }], NOW)).rejects.toMatchObject({
      code: 'STATE_WRITE_FAILED',
    });
    expect(store.recovery()?.rebuildError).toContain('ENOSPC');
    expect(store.record('api')).toBeUndefined();
    expect((await store.allocate('api', generationEntry('img:x'), NOW)).generation).toBe(13);
    expect((await reopen()).record('api')?.nextGeneration).toBe(14);
  });
});
