import { describe, expect, it } from 'vitest';
import {
  engineFacingSpec,
  HASH_SCHEME,
  schemeHash,
  SPEC_HASH_FIELDS,
  specHash,
} from '../../agent/model/hash.js';
import { compareConfigHash, compareSpecHash, specHashUnder } from '../../agent/model/hash-schemes.js';
import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import { buildKollaConfigJson } from '../../agent/render/kolla.js';
import { configHash } from '../../agent/render/renderer.js';
import { loadDesired } from '../../agent/spec/load.js';
import { cleanupAfterEach, LIBRARY_FILE, writeDir } from '../fixtures/spec/helpers.js';
import { containerSpec, GOLDEN_V1, MINIMAL, RICH } from '../support/spec.js';

cleanupAfterEach();

describe('golden hashes: a change to a hashed form that is not a new scheme fails here', () => {
  it('v1 (labels on running containers of spcd 0.1) is kept exactly', () => {
    expect(specHashUnder('v1', MINIMAL)).toBe(GOLDEN_V1.minimal);
    expect(specHashUnder('v1', RICH)).toBe(GOLDEN_V1.rich);
  });

  it('the current scheme', () => {
    expect(HASH_SCHEME).toBe('v2');
    expect(engineFacingSpec(MINIMAL)).toEqual({
      name: 'golden',
      image: 'img:1',
      network: 'none',
      stopSignal: 'SIGTERM',
      stopGraceMs: 10_000,
    });
    expect(specHash(MINIMAL)).toBe('v2-c7d9850e854782b8658a1f2f0e1cb8ac');
    expect(specHash(RICH)).toBe('v2-2d07d18530bea11a2f4530e0748a8496');
  });

  it('the config hash and the config.json it covers', () => {
    const files = [
      {
        dest: 'nova.conf',
        containerPath: '/etc/nova/nova.conf',
        owner: 'nova',
        mode: '0600',
        content: '[DEFAULT]\ndebug = False\n',
      },
    ];
    const json = buildKollaConfigJson({ name: 'nova_compute', command: ['nova-compute'] }, files);
    expect(JSON.parse(json)).toEqual({
      command: 'nova-compute',
      config_files: [
        {
          source: '/var/lib/kolla/config_files/nova.conf',
          dest: '/etc/nova/nova.conf',
          owner: 'nova',
          perm: '0600',
        },
      ],
      permissions: [],
    });
    expect(configHash(files, json)).toBe(
      'v1-61fccb9688b30ae67fb28c6766cae784c6ac48ea33f5197b5ffe71ce3a1cf62b',
    );
  });

  it('a definition that sets nothing optional hashes only what it must (spec/ defaults stay out)', async () => {
    // A new option whose loader default is not absent/false/empty (or listed in
    // HASH_DEFAULTS) would add a key here and change every container's hash.
    const dir = await writeDir({ 's.yaml': 'set: s\ncontainers:\n  golden:\n    image: img:1\n' });
    const [loaded] = allContainers(
      (await loadDesired({ setsDir: dir, checkLibraryFile: LIBRARY_FILE })).sets,
    );
    expect(Object.keys(engineFacingSpec(loaded!)).sort()).toEqual([
      'image',
      'name',
      'network',
      'stopGraceMs',
      'stopSignal',
    ]);
  });

  it('host binds read from YAML hash as before named volumes existed (no container is replaced)', async () => {
    // Pinned with the spcd that accepted host paths only: a key added to a host bind's
    // normalized form (a `kind: host`, say) would change both and replace every container.
    const dir = await writeDir({
      's.yaml': [
        'set: s',
        'containers:',
        '  golden:',
        '    image: img:1',
        '    binds:',
        '      - /run:/run:shared',
        '      - /etc/localtime:/etc/localtime:ro',
        '      - /var/lib/nova:/var/lib/nova:rw,rshared',
        '      - { source: /lib/modules, target: /lib/modules, read_only: true, propagation: rslave }',
        '      - { source: /sys/fs/cgroup, target: /sys/fs/cgroup }',
        '',
      ].join('\n'),
    });
    const [loaded] = allContainers(
      (await loadDesired({ setsDir: dir, checkLibraryFile: LIBRARY_FILE })).sets,
    );
    expect(specHash(loaded!)).toBe('v2-2197c3ebb4aef339937726f3caa050fa');
    expect(specHashUnder('v1', loaded!)).toBe('v1-23d9645b8feaaa1c0675018fe7ab6f4b');
  });
});

describe('a new optional field is hash-neutral', () => {
  it('a spcd that hashes one more field gives the same hash to a definition that does not use it', () => {
    const newer = { ...SPEC_HASH_FIELDS, readOnlyRootfs: true };
    const spec = { ...RICH, readOnlyRootfs: undefined } as ContainerSpec;
    expect(schemeHash(HASH_SCHEME, engineFacingSpec(spec, newer))).toBe(specHash(RICH));
    for (const unused of [false, [], {}, null]) {
      const s = { ...RICH, readOnlyRootfs: unused } as unknown as ContainerSpec;
      expect(schemeHash(HASH_SCHEME, engineFacingSpec(s, newer))).toBe(specHash(RICH));
    }
    const used = { ...RICH, readOnlyRootfs: true } as unknown as ContainerSpec;
    expect(schemeHash(HASH_SCHEME, engineFacingSpec(used, newer))).not.toBe(specHash(RICH));
  });

  it('so is a nested one (a new flag on binds, left false)', () => {
    const withFlag = { ...RICH, binds: RICH.binds.map((b) => ({ ...b, recursive: false, extra: [] })) };
    expect(specHash(withFlag as ContainerSpec)).toBe(specHash(RICH));
    const used = { ...RICH, binds: RICH.binds.map((b, i) => (i === 0 ? { ...b, recursive: true } : b)) };
    expect(specHash(used as ContainerSpec)).not.toBe(specHash(RICH));
  });

  it('every hashed field that is unset, false or empty hashes as if absent', () => {
    for (const [field, hashed] of Object.entries(SPEC_HASH_FIELDS)) {
      if (!hashed) continue;
      const value = (MINIMAL as unknown as Record<string, unknown>)[field];
      if (
        value === undefined ||
        value === false ||
        (typeof value === 'object' && Object.keys(value!).length === 0)
      ) {
        const { [field]: _gone, ...without } = MINIMAL as unknown as Record<string, unknown>;
        expect(specHash(without as unknown as ContainerSpec), field).toBe(specHash(MINIMAL));
      }
    }
  });

  it('fields outside the hash (health checks, config files, dependencies) change nothing', () => {
    const other = containerSpec('golden', { dependsOn: ['x'], role: 'hypervisor', source: 'elsewhere:9' });
    expect(specHash(other)).toBe(specHash(MINIMAL));
  });
});

describe('a new kolla config.json option is hash-neutral', () => {
  const files = [
    { dest: 'a.conf', containerPath: '/etc/a.conf', owner: 'a', mode: '0600', content: 'x = 1\n' },
    { dest: 'b.conf', containerPath: '/etc/b.conf', owner: 'b:b', mode: '0640', content: 'y = 2\n' },
  ];
  const plain = buildKollaConfigJson({ name: 'c', command: ['run-it'] }, files);
  const doc = JSON.parse(plain) as { config_files: Record<string, unknown>[] } & Record<string, unknown>;
  const text = (d: unknown): string => `${JSON.stringify(d, null, 2)}\n`;

  it('options left at their default, and key order, change nothing', () => {
    const { permissions: _p, ...withoutPermissions } = doc;
    // Reordered (permissions first, command last), with default-valued options a newer spcd might emit.
    const noisier = {
      permissions: [],
      extra: {},
      config_files: doc.config_files.map((f) => ({
        optional: false,
        merge: false,
        ...f,
        preserve_properties: false,
      })),
      command: doc.command,
    };
    expect(configHash(files, text(noisier))).toBe(configHash(files, plain));
    expect(configHash(files, text(withoutPermissions))).toBe(configHash(files, plain));
  });

  it('an option in use, or any real change, changes the hash', () => {
    const optional = {
      ...doc,
      config_files: doc.config_files.map((f, i) => (i === 0 ? { ...f, optional: true } : f)),
    };
    const perms = { ...doc, permissions: [{ path: '/var/log/a', owner: 'a:a', recurse: true }] };
    const owner = { ...doc, config_files: doc.config_files.map((f) => ({ ...f, owner: 'root' })) };
    const hashes = [plain, text(optional), text(perms), text(owner)].map((t) => configHash(files, t));
    expect(new Set(hashes).size).toBe(4);
  });
});

describe('comparing a label under its own scheme', () => {
  it('current scheme: same or changed', () => {
    expect(compareSpecHash(specHash(RICH), RICH)).toEqual({ kind: 'same' });
    expect(compareSpecHash(specHash(RICH), { ...RICH, image: 'x:2' })).toEqual({ kind: 'changed' });
  });

  it('v1 label: same when the spec is what v1 hashed, changed on a real edit', () => {
    const label = specHashUnder('v1', RICH)!;
    expect(compareSpecHash(label, RICH)).toEqual({ kind: 'same' });
    expect(compareSpecHash(label, { ...RICH, environment: { TZ: 'UTC' } })).toEqual({ kind: 'changed' });
    expect(compareSpecHash(label, { ...RICH, memoryBytes: undefined })).toEqual({ kind: 'changed' });
  });

  it('v1 label: a spec that uses an option v1 did not know is an edit, not adopted', () => {
    const newer = { ...SPEC_HASH_FIELDS, readOnlyRootfs: true };
    const unused = { ...RICH, readOnlyRootfs: false } as unknown as ContainerSpec;
    const used = { ...RICH, readOnlyRootfs: true } as unknown as ContainerSpec;
    expect(specHashUnder('v1', unused, newer)).toBe(specHashUnder('v1', RICH));
    expect(specHashUnder('v1', used, newer)).toBeNull();
  });

  it('unknown schemes: a newer spcd wrote it, say nothing', () => {
    expect(compareSpecHash('v9-0123', RICH)).toEqual({ kind: 'unknown-scheme', scheme: 'v9' });
    expect(compareSpecHash('garbage', RICH)).toEqual({ kind: 'unknown-scheme', scheme: '' });
    expect(specHashUnder('v9', RICH)).toBeUndefined();
  });

  it('config hashes: none has no scheme; another scheme is unknown', () => {
    expect(compareConfigHash('v1-a', 'v1-a')).toEqual({ kind: 'same' });
    expect(compareConfigHash('v1-a', 'v1-b')).toEqual({ kind: 'changed' });
    expect(compareConfigHash('none', 'v1-b')).toEqual({ kind: 'changed' });
    expect(compareConfigHash('v1-a', 'none')).toEqual({ kind: 'changed' });
    expect(compareConfigHash('v2-a', 'v1-a')).toEqual({ kind: 'unknown-scheme', scheme: 'v2' });
  });
});
