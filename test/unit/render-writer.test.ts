import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { Renderer, type RenderedConfig } from '../../agent/render/renderer.js';
import { nodeWriterFs, type WriterFs } from '../../agent/render/writer-fs.js';
import {
  currentConfigHash,
  readCurrentConfig,
  restoreConfigVersion,
  writeConfigDir,
} from '../../agent/render/writer.js';
import { containerSpec, file } from '../fixtures/render/compute-specs.js';

let base: string;
let root: string;
let templatesDir: string;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'spcd-render-writer-'));
  root = join(base, 'config');
  templatesDir = join(base, 'templates');
  await mkdir(join(templatesDir, 'nova'), { recursive: true });
  await writeFile(
    join(templatesDir, 'nova', 'nova.conf.j2'),
    '[DEFAULT]\nhost = {{ host }}\npassword = {{ pw }}\n',
  );
  await writeFile(join(templatesDir, 'policy.yaml.j2'), 'rules: {{ rules | to_json }}\n');
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const spec = containerSpec(
  'nova_compute',
  ['nova-compute'],
  [
    file('nova/nova.conf.j2', 'nova.conf', '/etc/nova/nova.conf', 'ini', 'nova'),
    file('policy.yaml.j2', 'policy/policy.yaml', '/etc/nova/policy.yaml', 'yaml', 'nova'),
  ],
);

function render(values: Record<string, unknown>): RenderedConfig {
  return new Renderer({ templatesDir, log: silentLogger() }).renderContainer(spec, values, new Set());
}

/** Every file and symlink under `dir`, with its bytes or link text: a byte-for-byte snapshot. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const rel = relative(dir, p);
      if (e.isSymbolicLink()) out[rel] = `-> ${await readlink(p)}`;
      else if (e.isDirectory()) await walk(p);
      else out[rel] = (await readFile(p)).toString('base64');
    }
  };
  await walk(dir);
  return out;
}

/** A facade over the real fs whose file writes fail (ENOSPC) once `limit` bytes in total were written. */
function diskFullAfter(limit: number): WriterFs {
  let written = 0;
  return {
    ...nodeWriterFs,
    async createExclusive(path, mode) {
      const h = await nodeWriterFs.createExclusive(path, mode);
      return {
        async write(data) {
          const room = limit - written;
          if (room <= 0)
            throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
          const n = await h.write(data.subarray(0, Math.min(room, data.length)));
          written += n;
          return n;
        },
        sync: () => h.sync(),
        close: () => h.close(),
      };
    },
  };
}

const v1 = { host: 'compute-1', pw: 'hunter2', rules: { a: 'x' } };
const v2 = { host: 'compute-2', pw: 'hunter2', rules: { a: 'y' } };
const v3 = { host: 'compute-3', pw: 'hunter2', rules: { a: 'z' } };

describe('writeConfigDir', () => {
  it('writes a versioned directory and points current at it', async () => {
    const rendered = render(v1);
    const res = await writeConfigDir(root, 'nova_compute', rendered);
    expect(res).toEqual({ path: join(root, 'nova_compute', 'current'), changed: true });
    const target = await readlink(res.path);
    expect(target.startsWith(`${rendered.hash}-`)).toBe(true);
    expect(await readFile(join(res.path, 'nova.conf'), 'utf8')).toBe(rendered.files[0]?.content);
    expect(await readFile(join(res.path, 'policy', 'policy.yaml'), 'utf8')).toBe('rules: {"a":"x"}\n');
    expect(JSON.parse(await readFile(join(res.path, 'config.json'), 'utf8')).command).toBe('nova-compute');
    expect((await stat(join(res.path, 'nova.conf'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(root, 'nova_compute', target))).mode & 0o777).toBe(0o700);
    expect(await currentConfigHash(root, 'nova_compute')).toBe(rendered.hash);
    const files = await readCurrentConfig(root, 'nova_compute');
    expect([...(files?.keys() ?? [])]).toEqual(['config.json', 'nova.conf', 'policy/policy.yaml']);
  });

  it('reports unchanged when the current version already holds the same files', async () => {
    await writeConfigDir(root, 'nova_compute', render(v1));
    const before = await snapshot(root);
    expect((await writeConfigDir(root, 'nova_compute', render(v1))).changed).toBe(false);
    expect(await snapshot(root)).toEqual(before);
  });

  it('keeps the previous version for rollback and removes older ones', async () => {
    const r1 = render(v1);
    const r2 = render(v2);
    const r3 = render(v3);
    await writeConfigDir(root, 'nova_compute', r1);
    await writeConfigDir(root, 'nova_compute', r2);
    await writeConfigDir(root, 'nova_compute', r3);
    const dir = join(root, 'nova_compute');
    const entries = (await readdir(dir)).sort();
    expect(entries).toHaveLength(4);
    expect((await readlink(join(dir, 'current'))).startsWith(r3.hash)).toBe(true);
    expect((await readlink(join(dir, 'previous'))).startsWith(r2.hash)).toBe(true);
    expect(entries.some((e) => e.startsWith(r1.hash))).toBe(false);

    expect(await restoreConfigVersion(root, 'nova_compute', r2.hash)).toBe(true);
    expect(await currentConfigHash(root, 'nova_compute')).toBe(r2.hash);
    expect((await readlink(join(dir, 'previous'))).startsWith(r3.hash)).toBe(true);
    expect((await readCurrentConfig(root, 'nova_compute'))?.get('nova.conf')).toContain('compute-2');
    // Idempotent (an undo repeated after a crash does not toggle it back), and a removed version is reported.
    expect(await restoreConfigVersion(root, 'nova_compute', r2.hash)).toBe(true);
    expect(await currentConfigHash(root, 'nova_compute')).toBe(r2.hash);
    expect(await restoreConfigVersion(root, 'nova_compute', r1.hash)).toBe(false);
    expect(await currentConfigHash(root, 'nova_compute')).toBe(r2.hash);
  });

  it('leaves every file identical when the render fails', async () => {
    await writeConfigDir(root, 'nova_compute', render(v1));
    await writeConfigDir(root, 'nova_compute', render(v2));
    const before = await snapshot(root);
    let err: unknown;
    try {
      await writeConfigDir(root, 'nova_compute', render({ host: 'compute-9', rules: {} }));
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'TEMPLATE_INVALID')).toBe(true);
    expect(await snapshot(root)).toEqual(before);
  });

  it('leaves the old config intact when the disk fills part way through a file', async () => {
    await writeConfigDir(root, 'nova_compute', render(v1));
    const before = await snapshot(root);
    const rendered = render(v2);
    const total =
      Buffer.byteLength(rendered.configJson) + rendered.files.reduce((n, f) => n + f.content.length, 0);
    for (const limit of [0, 1, 10, 40, total - 1]) {
      let err: unknown;
      try {
        await writeConfigDir(root, 'nova_compute', rendered, { fs: diskFullAfter(limit) });
      } catch (e) {
        err = e;
      }
      expect(isSpcdError(err, 'CONFIG_WRITE_FAILED'), `limit ${limit}`).toBe(true);
      expect((err as Error).message).toContain('ENOSPC');
      // Old version, current and previous links are byte-for-byte what they were; no half-written dir remains.
      expect(await snapshot(root), `limit ${limit}`).toEqual(before);
    }
    // With room enough, the same write goes through.
    expect((await writeConfigDir(root, 'nova_compute', rendered, { fs: diskFullAfter(total) })).changed).toBe(
      true,
    );
  });

  it('leaves the old config intact when the final rename fails', async () => {
    await writeConfigDir(root, 'nova_compute', render(v1));
    const before = await snapshot(root);
    const failingRename: WriterFs = {
      ...nodeWriterFs,
      async rename(from, to) {
        if (to.endsWith('/current')) throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
        return nodeWriterFs.rename(from, to);
      },
    };
    let err: unknown;
    try {
      await writeConfigDir(root, 'nova_compute', render(v2), { fs: failingRename });
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'CONFIG_WRITE_FAILED')).toBe(true);
    // `previous` may now also name the old version; `current` and the old files are untouched.
    const after = await snapshot(root);
    for (const [k, v] of Object.entries(before)) {
      if (!k.endsWith('previous')) expect(after[k], k).toBe(v);
    }
    expect(Object.keys(after).filter((k) => !k.endsWith('previous'))).toEqual(
      Object.keys(before).filter((k) => !k.endsWith('previous')),
    );
  });

  it('never writes through a symlink: a symlinked container dir is refused', async () => {
    const elsewhere = join(base, 'elsewhere');
    await mkdir(elsewhere);
    await mkdir(root, { recursive: true });
    await symlink(elsewhere, join(root, 'nova_compute'));
    let err: unknown;
    try {
      await writeConfigDir(root, 'nova_compute', render(v1));
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'CONFIG_WRITE_FAILED')).toBe(true);
    expect(await readdir(elsewhere)).toEqual([]);
  });

  it('refuses a current link that points outside the versions', async () => {
    await mkdir(join(root, 'nova_compute'), { recursive: true });
    await symlink('/etc', join(root, 'nova_compute', 'current'));
    let err: unknown;
    try {
      await readCurrentConfig(root, 'nova_compute');
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'STATE_CORRUPT')).toBe(true);
  });

  it('refuses an unsafe container name and writes nothing for a container without config', async () => {
    let err: unknown;
    try {
      await writeConfigDir(root, '../evil', render(v1));
    } catch (e) {
      err = e;
    }
    expect(isSpcdError(err, 'TEMPLATE_PATH')).toBe(true);
    const none = await writeConfigDir(root, 'plain', { files: [], configJson: '', hash: 'none' });
    expect(none.changed).toBe(false);
    expect(await lstat(join(root, 'plain')).catch(() => undefined)).toBeUndefined();
  });
});
