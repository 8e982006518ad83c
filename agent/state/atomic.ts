import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, unlink, readFile, mkdir } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { SpcdError } from '../errors.js';

/**
 * Writes a file so that a reader (or a crash) sees either the old content or
 * the new, never a torn mix: temp file in the same directory, fsync, rename,
 * fsync of the directory (kubelet's and balena's habit). Refuses to follow a
 * symlink at the temp path (O_EXCL).
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
    await fsyncDir(dir);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw writeFailed(path, err);
  }
}

/** STATE_WRITE_FAILED naming the file and the errno (ENOSPC, EROFS, EIO...) when there is one. */
export function writeFailed(path: string, err: unknown): SpcdError {
  if (err instanceof SpcdError && err.code === 'STATE_WRITE_FAILED') return err;
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  return new SpcdError(
    'STATE_WRITE_FAILED',
    `cannot write ${path}: ${err instanceof Error ? err.message : String(err)}`,
    { path, ...(typeof errno === 'string' ? { errno } : {}) },
    { cause: err },
  );
}

/** The file-system calls the state store makes; tests inject failures here. */
export interface StateFs {
  ensureDir(dir: string): Promise<void>;
  /** undefined when absent; STATE_CORRUPT when unreadable or not JSON. */
  readJsonFile(path: string): Promise<unknown>;
  /** All or nothing (see writeFileAtomic); STATE_WRITE_FAILED otherwise. */
  writeFileAtomic(path: string, data: string): Promise<void>;
  /** Renames a file within its directory and makes the rename durable. */
  moveAside(path: string, to: string): Promise<void>;
}

export const nodeStateFs: StateFs = {
  ensureDir: (dir) => ensureDir(dir),
  readJsonFile,
  writeFileAtomic: (path, data) => writeFileAtomic(path, data),
  async moveAside(path, to) {
    await rename(path, to);
    await fsyncDir(dirname(to));
  },
};

export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Creates a state folder (and its parents). A path that cannot be one (a
 * regular file in the way, no permission, a read-only file system) is
 * STATE_WRITE_FAILED naming the folder and the errno, not a bare EEXIST.
 */
export async function ensureDir(dir: string, mode = 0o700): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode });
  } catch (err) {
    const errno = (err as NodeJS.ErrnoException).code;
    const why =
      errno === 'EEXIST' || errno === 'ENOTDIR' ? 'a file is in the way of this folder or a parent' : errno;
    throw new SpcdError(
      'STATE_WRITE_FAILED',
      `cannot create the state folder ${dir}: ${why ?? String(err)}`,
      { path: dir, ...(typeof errno === 'string' ? { errno } : {}) },
      { cause: err },
    );
  }
}

/** Reads and parses a JSON file; undefined when absent, STATE_CORRUPT when unparseable. */
export async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new SpcdError(
      'STATE_CORRUPT',
      `cannot read ${path}: ${(err as Error).message}`,
      { path },
      { cause: err },
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new SpcdError(
      'STATE_CORRUPT',
      `${path} is not valid JSON: ${(err as Error).message}`,
      { path },
      { cause: err },
    );
  }
}
