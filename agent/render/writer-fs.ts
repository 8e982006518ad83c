import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';

/**
 * The file-system calls the writer makes, behind a narrow interface so a
 * test can inject faults (a disk that fills after N bytes, a rename that
 * fails). The default is node:fs/promises.
 */

export interface WriteHandle {
  /** Writes some of `data`; returns how many bytes were written. */
  write(data: Uint8Array): Promise<number>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

export interface DirEntry {
  readonly name: string;
  readonly isDirectory: boolean;
  readonly isSymbolicLink: boolean;
  readonly isFile: boolean;
}

export interface WriterFs {
  /** Create one directory (not recursive); fails with EEXIST when it exists. */
  mkdir(path: string, mode: number): Promise<void>;
  /** Create the whole path if missing (for the root directory only). */
  mkdirp(path: string, mode: number): Promise<void>;
  /** O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW: a fresh regular file, never through a symlink. */
  createExclusive(path: string, mode: number): Promise<WriteHandle>;
  fsyncDir(path: string): Promise<void>;
  symlink(target: string, path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  /** The link text, or undefined when the path does not exist. */
  readlink(path: string): Promise<string | undefined>;
  /** lstat: undefined when missing. */
  lstat(path: string): Promise<{ isDirectory: boolean; isSymbolicLink: boolean } | undefined>;
  readdir(path: string): Promise<DirEntry[]>;
  /** Read a regular file without following a symlink at its last component. */
  readFileNoFollow(path: string): Promise<Buffer>;
  /** rm -rf, not following symlinks. */
  rmTree(path: string): Promise<void>;
  unlink(path: string): Promise<void>;
}

function codeOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

export const nodeWriterFs: WriterFs = {
  async mkdir(path, mode) {
    await fsp.mkdir(path, { mode });
  },
  async mkdirp(path, mode) {
    await fsp.mkdir(path, { mode, recursive: true });
  },
  async createExclusive(path, mode) {
    const fh = await fsp.open(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      mode,
    );
    return {
      write: async (data) => (await fh.write(data, 0, data.length, null)).bytesWritten,
      sync: () => fh.sync(),
      close: () => fh.close(),
    };
  },
  async fsyncDir(path) {
    const fh = await fsp.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  },
  symlink: (target, path) => fsp.symlink(target, path),
  rename: (from, to) => fsp.rename(from, to),
  async readlink(path) {
    try {
      return await fsp.readlink(path);
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return undefined;
      throw err;
    }
  },
  async lstat(path) {
    try {
      const st = await fsp.lstat(path);
      return { isDirectory: st.isDirectory(), isSymbolicLink: st.isSymbolicLink() };
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return undefined;
      throw err;
    }
  },
  async readdir(path) {
    const entries = await fsp.readdir(path, { withFileTypes: true });
    return entries.map((e) => ({
      name: e.name,
      isDirectory: e.isDirectory(),
      isSymbolicLink: e.isSymbolicLink(),
      isFile: e.isFile(),
    }));
  },
  async readFileNoFollow(path) {
    const fh = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      return await fh.readFile();
    } finally {
      await fh.close();
    }
  },
  rmTree: (path) => fsp.rm(path, { recursive: true, force: true }),
  unlink: (path) => fsp.unlink(path),
};
