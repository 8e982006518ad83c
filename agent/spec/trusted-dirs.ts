import { lstat, readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { SpcdError } from '../errors.js';

/**
 * Templates run inside spcd (nunjucks is not a sandbox) and check scripts are
 * mounted into super-privileged containers: whoever can write them is root on
 * the host. spcd therefore uses a templates or checks directory only when
 * every entry in it, and every folder above it, is owned by root (or by
 * spcd's own user) and writable by nobody else. A sticky folder above (such
 * as /tmp) is accepted: others cannot rename or remove what is in it.
 */
export interface TrustOptions {
  /** Owners accepted besides root. Defaults to spcd's own effective uid. */
  readonly owners?: readonly number[];
  /** A bound on the walk, so a huge tree cannot stall a load. */
  readonly maxEntries?: number;
}

const GROUP_OR_OTHER_WRITE = 0o022;
const OTHER_WRITE = 0o002;
const STICKY = 0o1000;

export async function assertTrustedDir(dir: string, what: string, opts: TrustOptions = {}): Promise<void> {
  const owners = new Set([0, ...(opts.owners ?? [process.geteuid?.() ?? 0])]);
  const maxEntries = opts.maxEntries ?? 10_000;
  const untrusted = (path: string, why: string): SpcdError =>
    new SpcdError('UNTRUSTED_PATH', `${what} ${dir}: ${path} ${why}; spcd will not use it`, { path, dir });
  const check = async (path: string, ancestor: boolean): Promise<{ isDir: boolean }> => {
    const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
      throw new SpcdError('SPEC_IO', `${what} ${dir}: cannot read ${path}: ${err.code ?? err.message}`, {
        path,
      });
    });
    if (st.isSymbolicLink()) return { isDir: false }; // where it leads is checked by the loaders' containment
    if (!owners.has(st.uid)) throw untrusted(path, `is owned by uid ${st.uid}, not root`);
    const writable = ancestor
      ? (st.mode & OTHER_WRITE) !== 0 && (st.mode & STICKY) === 0
      : (st.mode & GROUP_OR_OTHER_WRITE) !== 0;
    if (writable) {
      throw untrusted(path, `is writable by its group or by others (mode ${(st.mode & 0o7777).toString(8)})`);
    }
    return { isDir: st.isDirectory() };
  };

  const top = resolve(dir);
  for (let up = dirname(top); ; up = dirname(up)) {
    await check(up, true);
    if (up === dirname(up)) break;
  }
  let seen = 0;
  const walk = async (path: string): Promise<void> => {
    if (++seen > maxEntries) throw untrusted(top, `holds more than ${maxEntries} entries`);
    const { isDir } = await check(path, false);
    if (!isDir) return;
    for (const name of (await readdir(path)).sort()) await walk(join(path, name));
  };
  await walk(top);
}
