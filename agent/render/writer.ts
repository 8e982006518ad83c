import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { CONFIG_JSON } from './kolla.js';
import { checkContainerName, checkDest } from './paths.js';
import { NO_CONFIG_HASH, renderedFileMap, type RenderedConfig } from './renderer.js';
import { nodeWriterFs, type WriteHandle, type WriterFs } from './writer-fs.js';

/**
 * The atomic switch. Layout on the host, per container:
 *
 *   <root>/<name>/<hash>-<random>/   one version: the files + config.json
 *   <root>/<name>/current  -> <hash>-<random>   (relative symlink; bind-mount this)
 *   <root>/<name>/previous -> <hash>-<random>   (the one before, kept for rollback)
 *
 * A new version is written into a directory nobody else refers to (created
 * fresh, files opened O_CREAT|O_EXCL|O_NOFOLLOW, every file and directory
 * fsynced). Only then is `current` swapped by creating a temporary symlink and
 * renaming it over `current`, which is atomic, and the parent is fsynced. A
 * render or write that fails never touches `current` or the version it
 * points to. Versions other than current and previous are removed after the
 * swap.
 *
 * Docker resolves the bind-mount source (the `current` symlink) each time the
 * container starts: a running container keeps the version it started with,
 * and a restart or recreate picks up the new one (checked on this host's
 * dockerd, see docs/reference/config-rendering.md). One writer per container at a time: the
 * reconciler is the only caller.
 */

export const CURRENT = 'current';
export const PREVIOUS = 'previous';
const VERSION = /^(v\d+-[0-9a-f]{64})-([0-9a-f]{8,32})$/;
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

export interface WriterOptions {
  fs?: WriterFs;
  log?: Logger;
  /** Hex suffix for version directory names; random by default. */
  randomSuffix?: () => string;
}

/** The stable path to bind-mount read-only at /var/lib/kolla/config_files. */
export function configDirPath(rootDir: string, containerName: string): string {
  return join(rootDir, checkContainerName(containerName), CURRENT);
}

function defaultSuffix(): string {
  return randomBytes(6).toString('hex');
}

function errText(err: unknown): string {
  if (err instanceof Error)
    return 'code' in err && err.code ? `${String(err.code)}: ${err.message}` : err.message;
  return String(err);
}

async function versionAt(fs: WriterFs, dir: string, link: string): Promise<string | undefined> {
  const target = await fs.readlink(join(dir, link));
  if (target === undefined) return undefined;
  if (!VERSION.test(target)) {
    throw new SpcdError(
      'STATE_CORRUPT',
      `${join(dir, link)} points to ${JSON.stringify(target)}, not a config version`,
      {
        path: join(dir, link),
      },
    );
  }
  return target;
}

async function ensureRealDir(fs: WriterFs, dir: string): Promise<void> {
  let st = await fs.lstat(dir);
  if (st === undefined) {
    try {
      await fs.mkdir(dir, DIR_MODE);
    } catch (err) {
      if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
    }
    st = await fs.lstat(dir);
  }
  if (!st || st.isSymbolicLink || !st.isDirectory) {
    throw new SpcdError('CONFIG_WRITE_FAILED', `${dir} is not a directory (a symlink is refused)`, {
      path: dir,
    });
  }
}

async function writeFully(h: WriteHandle, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const n = await h.write(data.subarray(off));
    if (n <= 0) throw new Error('write made no progress');
    off += n;
  }
}

async function writeVersion(fs: WriterFs, vdir: string, files: Map<string, string>): Promise<void> {
  await fs.mkdir(vdir, DIR_MODE);
  const dirs = new Set<string>([vdir]);
  for (const [dest, content] of [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // Parents are created here, inside a directory this call just made, so
    // no path component can be a symlink someone else placed.
    const parts = dest.split('/');
    let cur = vdir;
    for (const part of parts.slice(0, -1)) {
      cur = join(cur, part);
      if (!dirs.has(cur)) {
        await fs.mkdir(cur, DIR_MODE);
        dirs.add(cur);
      }
    }
    const h = await fs.createExclusive(join(vdir, dest), FILE_MODE);
    try {
      await writeFully(h, Buffer.from(content, 'utf8'));
      await h.sync();
    } finally {
      await h.close();
    }
  }
  // Deepest first, so each directory entry is durable before its parent's.
  for (const d of [...dirs].sort((a, b) => b.length - a.length)) await fs.fsyncDir(d);
}

async function swapLink(
  fs: WriterFs,
  dir: string,
  name: string,
  target: string,
  suffix: string,
): Promise<void> {
  const tmp = join(dir, `.${name}.tmp-${suffix}`);
  await fs.symlink(target, tmp);
  try {
    await fs.rename(tmp, join(dir, name));
  } catch (err) {
    await fs.unlink(tmp).catch(() => undefined);
    throw err;
  }
}

async function collectGarbage(fs: WriterFs, dir: string, keep: Set<string>, log?: Logger): Promise<void> {
  try {
    for (const e of await fs.readdir(dir)) {
      if (e.name === CURRENT || e.name === PREVIOUS || keep.has(e.name)) continue;
      if (e.isDirectory && VERSION.test(e.name)) await fs.rmTree(join(dir, e.name));
      else if (e.isSymbolicLink && e.name.startsWith('.') && e.name.includes('.tmp-'))
        await fs.unlink(join(dir, e.name));
    }
  } catch (err) {
    log?.warn(
      { dir, err: errText(err) },
      'removing old config versions failed; will retry on the next write',
    );
  }
}

async function readTree(fs: WriterFs, base: string, rel: string, out: Map<string, string>): Promise<void> {
  for (const e of await fs.readdir(rel ? join(base, rel) : base)) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory) await readTree(fs, base, p, out);
    else if (e.isFile) out.set(p, (await fs.readFileNoFollow(join(base, p))).toString('utf8'));
    // symlinks are never written by spcd; they are not followed.
  }
}

function sameFiles(a: Map<string, string>, b: Map<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/**
 * Write `rendered` as a new version and switch `current` to it. Returns the
 * stable bind-mount path and whether anything changed (false when current
 * already holds exactly these files). On failure throws CONFIG_WRITE_FAILED
 * and leaves the current version untouched.
 */
export async function writeConfigDir(
  rootDir: string,
  containerName: string,
  rendered: RenderedConfig,
  opts: WriterOptions = {},
): Promise<{ path: string; changed: boolean }> {
  const fs = opts.fs ?? nodeWriterFs;
  const suffix = opts.randomSuffix ?? defaultSuffix;
  const path = configDirPath(rootDir, containerName);
  if (rendered.hash === NO_CONFIG_HASH) return { path, changed: false };
  for (const f of rendered.files) checkDest(f.dest, containerName);
  const files = renderedFileMap(rendered);
  const dir = dirname(path);

  let oldVersion: string | undefined;
  try {
    await fs.mkdirp(rootDir, DIR_MODE);
    await ensureRealDir(fs, dir);
    oldVersion = await versionAt(fs, dir, CURRENT);
    if (oldVersion?.startsWith(`${rendered.hash}-`)) {
      const existing = new Map<string, string>();
      await readTree(fs, join(dir, oldVersion), '', existing);
      if (sameFiles(existing, files)) return { path, changed: false };
    }
  } catch (err) {
    if (err instanceof SpcdError) throw err;
    throw new SpcdError(
      'CONFIG_WRITE_FAILED',
      `config dir ${dir}: ${errText(err)}`,
      { container: containerName },
      {
        cause: err,
      },
    );
  }

  const version = `${rendered.hash}-${suffix()}`;
  const vdir = join(dir, version);
  try {
    await writeVersion(fs, vdir, files);
    if (oldVersion) await swapLink(fs, dir, PREVIOUS, oldVersion, suffix());
    await swapLink(fs, dir, CURRENT, version, suffix());
  } catch (err) {
    // `current` was not renamed (that is the last step): the old version is
    // still the one in use. Drop the half-written new one.
    await fs.rmTree(vdir).catch(() => undefined);
    throw new SpcdError(
      'CONFIG_WRITE_FAILED',
      `writing config for ${containerName} failed, the previous config is untouched: ${errText(err)}`,
      { container: containerName },
      { cause: err },
    );
  }
  try {
    await fs.fsyncDir(dir);
  } catch (err) {
    opts.log?.warn({ dir, err: errText(err) }, 'fsync of the config dir failed after the switch');
  }
  await collectGarbage(fs, dir, new Set([version, ...(oldVersion ? [oldVersion] : [])]), opts.log);
  opts.log?.info({ container: containerName, hash: rendered.hash, version }, 'config switched');
  return { path, changed: true };
}

/** The files of the current version (dest -> content, with config.json), or undefined when none. */
export async function readCurrentConfig(
  rootDir: string,
  containerName: string,
  opts: { fs?: WriterFs } = {},
): Promise<Map<string, string> | undefined> {
  const fs = opts.fs ?? nodeWriterFs;
  const dir = dirname(configDirPath(rootDir, containerName));
  const version = await versionAt(fs, dir, CURRENT);
  if (version === undefined) return undefined;
  const out = new Map<string, string>();
  await readTree(fs, join(dir, version), '', out);
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The files of a kept version rendered with `hash` (current, previous, or one
 * not yet collected), or undefined when none is kept. Read only: for showing
 * what a generation's config was (`spcctl generations --diff`).
 */
export async function readConfigVersion(
  rootDir: string,
  containerName: string,
  hash: string,
  opts: { fs?: WriterFs } = {},
): Promise<Map<string, string> | undefined> {
  const fs = opts.fs ?? nodeWriterFs;
  const dir = dirname(configDirPath(rootDir, containerName));
  const entries = await fs.readdir(dir).catch(() => []);
  const version = entries.find((e) => e.isDirectory && VERSION.exec(e.name)?.[1] === hash)?.name;
  if (version === undefined) return undefined;
  const out = new Map<string, string>();
  await readTree(fs, join(dir, version), '', out);
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The config hash of the current version (from its directory name), or undefined. */
export async function currentConfigHash(
  rootDir: string,
  containerName: string,
  opts: { fs?: WriterFs } = {},
): Promise<string | undefined> {
  const fs = opts.fs ?? nodeWriterFs;
  const version = await versionAt(fs, dirname(configDirPath(rootDir, containerName)), CURRENT);
  return version === undefined ? undefined : VERSION.exec(version)?.[1];
}

/**
 * Point `current` at the version rendered with `hash` (the config a rolled-back
 * generation ran with), and `previous` at what current was. Idempotent: when
 * current already has that hash nothing changes. Returns false when no
 * version with that hash is kept (nothing is changed then).
 */
export async function restoreConfigVersion(
  rootDir: string,
  containerName: string,
  hash: string,
  opts: WriterOptions = {},
): Promise<boolean> {
  const fs = opts.fs ?? nodeWriterFs;
  const suffix = opts.randomSuffix ?? defaultSuffix;
  const dir = dirname(configDirPath(rootDir, containerName));
  try {
    const cur = await versionAt(fs, dir, CURRENT);
    if (cur?.startsWith(`${hash}-`)) return true;
    const prev = await versionAt(fs, dir, PREVIOUS);
    const candidates = (await fs.readdir(dir).catch(() => []))
      .filter((e) => e.isDirectory && VERSION.test(e.name) && e.name.startsWith(`${hash}-`))
      .map((e) => e.name);
    // The `previous` link names the one written for the old generation; any other copy is as good.
    const target = prev && candidates.includes(prev) ? prev : candidates[0];
    if (target === undefined) return false;
    await swapLink(fs, dir, CURRENT, target, suffix());
    if (cur) await swapLink(fs, dir, PREVIOUS, cur, suffix());
    await fs.fsyncDir(dir);
    opts.log?.info({ container: containerName, version: target }, 'config restored');
    return true;
  } catch (err) {
    if (err instanceof SpcdError) throw err;
    throw new SpcdError(
      'CONFIG_WRITE_FAILED',
      `restoring config ${hash} of ${containerName}: ${errText(err)}`,
      { container: containerName },
      { cause: err },
    );
  }
}

/** Remove every version of a container's config (when the container leaves the desired state). */
export async function removeConfigDir(
  rootDir: string,
  containerName: string,
  opts: { fs?: WriterFs } = {},
): Promise<void> {
  const fs = opts.fs ?? nodeWriterFs;
  await fs.rmTree(dirname(configDirPath(rootDir, containerName)));
}

export { CONFIG_JSON };
