import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatGenerationDiff } from '../../agent/cli/gen-diff.js';
import { fileDigests } from '../../agent/config/template-config.js';
import { generationDiff, type ConfigVersions } from '../../agent/status/generation-diff.js';
import { isSpcdError } from '../../agent/errors.js';
import { sha256Hex } from '../../agent/model/hash.js';
import { specChanges } from '../../agent/model/spec-diff.js';
import type { ConfigFileSpec } from '../../agent/model/spec.js';
import { StateStore } from '../../agent/state/store.js';
import { containerSpec, RICH } from '../support/spec.js';

const conf = (dest: string): ConfigFileSpec => ({
  template: `${dest}.j2`,
  dest,
  containerPath: `/etc/x/${dest}`,
  owner: 'root',
  mode: '0644',
  format: 'ini',
});

describe('spec changes between two specs', () => {
  it('names each changed field by path, walks named lists by their name, ignores where it was read from', () => {
    const before = containerSpec('api', {
      image: 'img:1',
      environment: { A: '1', GONE: 'x' },
      command: ['serve'],
      binds: [
        { source: '/a', target: '/etc/a', readOnly: true },
        { source: '/b', target: '/etc/b', readOnly: true },
      ],
      source: 'sets/a.yaml:3',
    });
    const after = containerSpec('api', {
      image: 'img:2',
      environment: { A: '2', NEW: 'y' },
      command: ['serve', '--debug'],
      binds: [
        { source: '/0', target: '/etc/0', readOnly: true },
        { source: '/a', target: '/etc/a', readOnly: false },
        { source: '/b', target: '/etc/b', readOnly: true },
      ],
      source: 'sets/a.yaml:9',
    });
    expect(specChanges(before, after)).toEqual([
      // an inserted bind does not shift the others: they are matched by target
      { path: 'binds[target=/etc/a].readOnly', from: true, to: false },
      { path: 'binds[target=/etc/0]', to: { source: '/0', target: '/etc/0', readOnly: true } },
      { path: 'command', from: ['serve'], to: ['serve', '--debug'] },
      { path: 'environment.A', from: '1', to: '2' },
      { path: 'environment.GONE', from: 'x' },
      { path: 'environment.NEW', to: 'y' },
      { path: 'image', from: 'img:1', to: 'img:2' },
    ]);
    expect(specChanges(RICH, { ...RICH, source: 'elsewhere:1' })).toEqual([]);
  });

  it('a list without a distinct name (capAdd, ulimits with a repeated name) is one value', () => {
    const a = containerSpec('x', { capAdd: ['NET_ADMIN'] });
    const b = containerSpec('x', { capAdd: ['NET_ADMIN', 'SYS_ADMIN'] });
    expect(specChanges(a, b)).toEqual([
      { path: 'capAdd', from: ['NET_ADMIN'], to: ['NET_ADMIN', 'SYS_ADMIN'] },
    ]);
  });
});

/** Config versions as the writer keeps them: by config hash. */
function keptVersions(kept: Record<string, Record<string, string>>, secrets: string[] = []): ConfigVersions {
  return {
    files: async (_name, hash) => (kept[hash] ? new Map(Object.entries(kept[hash])) : undefined),
    secrets: () => new Set(secrets),
  };
}

async function storeWith(dir: string): Promise<StateStore> {
  const store = new StateStore(dir);
  await store.load();
  return store;
}

describe('generation diff (daemon side)', () => {
  const v1 = { 'a.conf': '[DEFAULT]\nlevel = 1\npassword = s3cret\n', 'config.json': '{"command":"x"}\n' };
  const v2 = {
    'a.conf': '[DEFAULT]\nlevel = 2\npassword = s3cret\n',
    'b.conf': 'new\n',
    'config.json': '{"command":"x"}\n',
  };
  const d1 = fileDigests(new Map(Object.entries(v1)));
  const d2 = fileDigests(new Map(Object.entries(v2)));

  it('image, digest, spec fields and config files with a masked unified diff while both versions are kept', async () => {
    const store = await storeWith(mkdtempSync(join(tmpdir(), 'spcd-gdiff-')));
    const spec1 = containerSpec('api', {
      image: 'img:1',
      config: [conf('a.conf')],
      environment: { PW: 's3cret' },
    });
    const spec2 = {
      ...spec1,
      image: 'img:2',
      config: [conf('a.conf'), conf('b.conf')],
      environment: { PW: 'n3w' },
    };
    const base = { specHash: 's', spec: spec1 };
    await store.allocate(
      'api',
      { ...base, image: 'img:1', imageDigest: 'sha256:11', configHash: 'h1', configFiles: d1 },
      new Date(0),
    );
    await store.allocate(
      'api',
      { ...base, spec: spec2, image: 'img:2', imageDigest: 'sha256:22', configHash: 'h2', configFiles: d2 },
      new Date(1),
    );
    const d = await generationDiff(
      'api',
      store.record('api'),
      1,
      2,
      keptVersions({ h1: v1, h2: v2 }, ['s3cret']),
    );
    expect(d.image).toEqual({ from: 'img:1', to: 'img:2' });
    expect(d.imageDigest).toEqual({ from: 'sha256:11', to: 'sha256:22' });
    expect(d.spec.map((c) => c.path)).toEqual(['config[dest=b.conf]', 'environment.PW', 'image']);
    // a secret value in the spec is masked like in the config diffs
    expect(d.spec.find((c) => c.path === 'environment.PW')).toEqual({
      path: 'environment.PW',
      from: '******',
      to: 'n3w',
    });
    expect(d.config.changed).toBe(true);
    expect(d.config.filesKnown).toBe(true);
    expect(d.config.files.map((f) => [f.path, f.change])).toEqual([
      ['a.conf', 'modified'],
      ['b.conf', 'added'],
    ]);
    const a = d.config.files[0]!;
    expect(a.fromSha256).toBe(sha256Hex(v1['a.conf']));
    expect(a.toSha256).toBe(sha256Hex(v2['a.conf']));
    expect(a.diff).toContain('-level = 1\n+level = 2\n');
    expect(a.diff).toContain(' password = ******');
    expect(JSON.stringify(d)).not.toContain('s3cret');

    const text = formatGenerationDiff(d);
    expect(text.split('\n').slice(0, 6)).toEqual([
      'api: generation 1 -> 2',
      'image:   img:1 -> img:2',
      'digest:  sha256:11 -> sha256:22',
      'spec:',
      `  config[dest=b.conf]: (absent) -> ${JSON.stringify(conf('b.conf'))}`,
      '  environment.PW: "******" -> "n3w"',
    ]);
    expect(text).toMatch(/^ {2}modified {2}a\.conf {2}[0-9a-f]{12} -> [0-9a-f]{12}$/m);
    expect(text).toMatch(/^ {2}added {5}b\.conf {2}- -> [0-9a-f]{12}$/m);
    expect(text).toContain('\n--- a/a.conf\n+++ b/a.conf\n@@');
    // the image has its own line, not repeated among the spec fields
    expect(text).not.toContain('  image:');
  });

  it('a rotated password stays masked whichever way round the generations are asked', async () => {
    const store = await storeWith(mkdtempSync(join(tmpdir(), 'spcd-gdiff-')));
    const spec = containerSpec('api', { config: [conf('a.conf')] });
    const e = { image: 'img:1', imageDigest: null, specHash: 's', spec };
    const old = { 'a.conf': '[DEFAULT]\npassword = old-pw\n' };
    const cur = { 'a.conf': '[DEFAULT]\npassword = new-pw\n' };
    await store.allocate('api', { ...e, configHash: 'h1' }, new Date(0));
    await store.allocate('api', { ...e, configHash: 'h2' }, new Date(1));
    // only the current secret is known: old-pw was rotated out of the secrets file
    const versions = keptVersions({ h1: old, h2: cur }, ['new-pw']);
    for (const [from, to] of [
      [1, 2],
      [2, 1],
    ] as const) {
      const d = await generationDiff('api', store.record('api'), from, to, versions);
      const text = d.config.files[0]!.diff!;
      expect(text).toContain('-password = ******\n+password = ******');
      expect(JSON.stringify(d)).not.toMatch(/old-pw|new-pw/);
    }
  });

  it('without the kept versions: file digests only, no content', async () => {
    const store = await storeWith(mkdtempSync(join(tmpdir(), 'spcd-gdiff-')));
    const spec = containerSpec('api', { config: [conf('a.conf')] });
    const e = { image: 'img:1', imageDigest: null, specHash: 's', spec };
    await store.allocate('api', { ...e, configHash: 'h1', configFiles: d1 }, new Date(0));
    await store.allocate('api', { ...e, configHash: 'h2', configFiles: d2 }, new Date(1));
    const d = await generationDiff('api', store.record('api'), 1, 2, keptVersions({ h2: v2 }));
    expect(d.image).toBeUndefined();
    expect(d.spec).toEqual([]);
    expect(d.config.files.map((f) => [f.path, f.change, f.diff])).toEqual([
      ['a.conf', 'modified', undefined],
      ['b.conf', 'added', undefined],
    ]);
    expect(formatGenerationDiff(d)).not.toContain('---');
  });

  it('the same generation twice: no difference', async () => {
    const store = await storeWith(mkdtempSync(join(tmpdir(), 'spcd-gdiff-')));
    await store.allocate(
      'api',
      { image: 'i:1', imageDigest: null, specHash: 's', configHash: 'none', spec: containerSpec('api') },
      new Date(0),
    );
    const d = await generationDiff('api', store.record('api'), 1, 1, undefined);
    expect(d).toMatchObject({ spec: [], config: { changed: false, filesKnown: true, files: [] } });
    expect(formatGenerationDiff(d)).toBe('api: generation 1 -> 1\nno difference\n');
  });

  it('a generation no longer kept is NOT_FOUND, naming the container, the number and what is kept', async () => {
    const store = await storeWith(mkdtempSync(join(tmpdir(), 'spcd-gdiff-')));
    await store.allocate(
      'api',
      { image: 'i:1', imageDigest: null, specHash: 's', configHash: 'none', spec: containerSpec('api') },
      new Date(0),
    );
    const err = await generationDiff('api', store.record('api'), 1, 7, undefined).catch((e: unknown) => e);
    expect(isSpcdError(err, 'NOT_FOUND')).toBe(true);
    expect((err as Error).message).toBe('container api has no generation 7 (kept: 1)');
  });

  it('a state file written before generations recorded their files still loads and diffs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spcd-gdiff-old-'));
    const spec = containerSpec('api', { config: [conf('a.conf')] });
    const old = (generation: number, configHash: string, image: string) => ({
      generation,
      image,
      imageDigest: null,
      specHash: 's',
      configHash,
      createdAt: '2026-01-01T00:00:00.000Z',
      outcome: generation === 2 ? 'current' : 'superseded',
      spec: { ...spec, image },
    });
    writeFileSync(
      join(dir, 'state.json'),
      JSON.stringify({
        version: 1,
        containers: {
          api: {
            nextGeneration: 3,
            lastKnownGood: 2,
            heldStopped: false,
            generations: [old(1, 'h1', 'img:1'), old(2, 'h2', 'img:2')],
          },
        },
      }),
    );
    const store = new StateStore(dir);
    expect(await store.load()).toBeUndefined();
    // generation 2's version is still kept: its digests come from the files on disk
    const gone = await generationDiff('api', store.record('api'), 1, 2, keptVersions({ h2: v2 }));
    expect(gone.image).toEqual({ from: 'img:1', to: 'img:2' });
    expect(gone.config).toEqual({ changed: true, filesKnown: false, files: [] });
    expect(formatGenerationDiff(gone)).toContain('(which files changed is not known');
    // both kept: the files and the diffs are known though the state never recorded them
    const both = await generationDiff('api', store.record('api'), 1, 2, keptVersions({ h1: v1, h2: v2 }));
    expect(both.config.filesKnown).toBe(true);
    expect(both.config.files.map((f) => f.path)).toEqual(['a.conf', 'b.conf']);
    expect(both.config.files[0]!.diff).toContain('+level = 2');
    // and a new generation records its files next to the old ones, in the same file
    await store.allocate(
      'api',
      { image: 'img:3', imageDigest: null, specHash: 's', configHash: 'h3', configFiles: d2, spec },
      new Date(5),
    );
    const reread = new StateStore(dir);
    expect(await reread.load()).toBeUndefined();
    expect(reread.generation('api', 3)?.configFiles).toEqual(d2);
    expect(reread.generation('api', 1)?.configFiles).toBeUndefined();
  });
});
