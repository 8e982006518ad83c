import type { Stats } from 'node:fs';
import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { isSpcdError, SpcdError } from '../errors.js';
import type { SpecProblem } from './problems.js';

/**
 * spcd runs as root and what it reads decides what runs as root: templates
 * run inside spcd (nunjucks is not a sandbox), check scripts are mounted into
 * super-privileged containers, the sets, overrides and globals say which
 * images run with which privileges, and the secrets and credentials are
 * secrets. Each such input is used only when the path spcd reads (its
 * resolved target, symlinks followed) and every folder above it, up to `/`,
 * are owned by root (or spcd's own user) and writable by nobody else; and the
 * folders above the path as named (where a symlink lives) likewise, so nobody
 * else can point the link elsewhere after the check.
 *
 * A folder above that is sticky (mode +t, as /tmp) and owned by root or
 * spcd's user is accepted although others may write it: the kernel lets
 * nobody but an entry's owner (or the folder's) rename or remove an entry of
 * a sticky folder, so a path checked through it cannot be swapped, and an
 * entry someone else created there is refused for its owner. The input itself
 * is never accepted sticky and writable by others.
 */
export interface TrustOptions {
  /** Owners accepted besides root. Defaults to spcd's own effective uid. */
  readonly owners?: readonly number[];
  /** A bound on the walk of a tree, so a huge tree cannot stall a load. */
  readonly maxEntries?: number;
  /** Who refuses the input, in the message ("… ; spcd will not use it"). Default `spcd`. */
  readonly reader?: string;
}

/**
 * What the input is: `tree` a directory whose every entry is checked
 * (templates, checks, sets); `dir` a directory alone (the config root);
 * `file` a regular file; `secret` a regular file only its owner may read:
 * mode 0600 or stricter (the secrets file, registry credentials, etcd key).
 */
export type TrustKind = 'tree' | 'dir' | 'file' | 'secret';

const GROUP_OR_OTHER_WRITE = 0o022;
const GROUP_OR_OTHER_ANY = 0o077;
const STICKY = 0o1000;

function modeText(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;
}

class Checker {
  private readonly owners: Set<number>;
  private readonly reader: string;

  constructor(
    private readonly input: string,
    private readonly what: string,
    opts: TrustOptions,
  ) {
    this.owners = new Set([0, ...(opts.owners ?? [process.geteuid?.() ?? 0])]);
    this.reader = opts.reader ?? 'spcd';
  }

  refuse(
    path: string,
    why: string,
    code: 'UNTRUSTED_PATH' | 'SECRETS_INSECURE' = 'UNTRUSTED_PATH',
  ): SpcdError {
    const at = path === this.input ? path : `${this.input}: ${path}`;
    return new SpcdError(code, `${this.what} ${at} ${why}; ${this.reader} will not use it`, {
      path,
      input: this.input,
    });
  }

  async lstat(path: string): Promise<Stats> {
    return lstat(path).catch((err: NodeJS.ErrnoException) => {
      throw new SpcdError(
        'SPEC_IO',
        `${this.what} ${this.input}: cannot read ${path}: ${err.code ?? err.message}`,
        {
          path,
          input: this.input,
        },
      );
    });
  }

  owner(path: string, st: Stats, code?: 'SECRETS_INSECURE'): void {
    if (!this.owners.has(st.uid)) throw this.refuse(path, `is owned by uid ${st.uid}, not root`, code);
  }

  /** A folder above the input: owned by root (or spcd), writable by no one else unless sticky. */
  ancestor(path: string, st: Stats): void {
    this.owner(path, st);
    if ((st.mode & GROUP_OR_OTHER_WRITE) !== 0 && (st.mode & STICKY) === 0) {
      throw this.refuse(
        path,
        `is a folder above it writable by its group or by others (mode ${modeText(st.mode)})`,
      );
    }
  }

  /** The input or an entry inside it: owned by root (or spcd), writable by no one else. */
  entry(path: string, st: Stats): void {
    this.owner(path, st);
    if ((st.mode & GROUP_OR_OTHER_WRITE) !== 0) {
      throw this.refuse(path, `is writable by its group or by others (mode ${modeText(st.mode)})`);
    }
  }

  /**
   * Every folder above `path`, up to `/`; symlinks are skipped (the folder
   * holding one is checked). `missingOk`: folders not made yet are skipped.
   */
  async above(path: string, missingOk = false): Promise<void> {
    for (let up = dirname(path); ; up = dirname(up)) {
      const st = missingOk ? await lstat(up).catch(() => undefined) : await this.lstat(up);
      if (st && !st.isSymbolicLink()) this.ancestor(up, st);
      if (up === dirname(up)) return;
    }
  }
}

/**
 * Checks one input spcd reads as root and returns its resolved path (use that
 * one: it is the path checked). Refuses with UNTRUSTED_PATH (SECRETS_INSECURE
 * for a `secret` file's own owner or mode) naming the path and what is wrong;
 * SPEC_IO when it cannot be read. `optional`: a missing input gives undefined.
 */
export async function assertTrusted(
  path: string,
  what: string,
  kind: TrustKind,
  opts: TrustOptions & { optional?: boolean } = {},
): Promise<string | undefined> {
  const named = resolve(path);
  const c = new Checker(named, what, opts);
  let real: string;
  try {
    real = await realpath(named);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (opts.optional && code === 'ENOENT') return undefined;
    throw new SpcdError('SPEC_IO', `${what} ${named}: cannot read it: ${code ?? String(err)}`, {
      path: named,
    });
  }
  await c.above(named);
  if (real !== named) await c.above(real);
  const st = await stat(real);
  if (kind === 'tree' || kind === 'dir') {
    if (!st.isDirectory()) throw c.refuse(real, 'is not a directory');
    if (kind === 'dir') c.entry(real, st);
    else await walkTree(c, real, opts.maxEntries ?? 10_000);
    return real;
  }
  if (!st.isFile()) throw c.refuse(real, 'is not a regular file');
  if (kind === 'file') c.entry(real, st);
  else checkSecretStats(c, real, st);
  return real;
}

function checkSecretStats(c: Checker, path: string, st: Stats): void {
  c.owner(path, st, 'SECRETS_INSECURE');
  if ((st.mode & GROUP_OR_OTHER_ANY) !== 0) {
    throw c.refuse(
      path,
      `has mode ${modeText(st.mode)}: it must be readable and writable by its owner only (chmod 0600)`,
      'SECRETS_INSECURE',
    );
  }
}

/**
 * The owner and mode of a secret file as opened (fstat on the descriptor
 * read, so the file checked is the file read): SECRETS_INSECURE unless owned
 * by root (or spcd) and mode 0600 or stricter.
 */
export function assertSecretStats(path: string, what: string, st: Stats, opts: TrustOptions = {}): void {
  checkSecretStats(new Checker(path, what, opts), path, st);
}

async function walkTree(c: Checker, top: string, maxEntries: number): Promise<void> {
  let seen = 0;
  const walk = async (path: string): Promise<void> => {
    if (++seen > maxEntries) throw c.refuse(top, `holds more than ${maxEntries} entries`);
    const st = await c.lstat(path);
    // Where a link inside leads is checked by the loaders' containment (it stays in this tree).
    if (st.isSymbolicLink()) return;
    c.entry(path, st);
    if (!st.isDirectory()) return;
    for (const name of (await readdir(path)).sort()) await walk(join(path, name));
  };
  await walk(top);
}

/** The inputs of one load of the definitions, as the daemon and `spcctl validate` name them. */
export interface TrustedInputs {
  readonly setsDir: string;
  readonly overridesFile?: string | undefined;
  readonly templatesDir?: string | undefined;
  readonly healthchecksDir?: string | undefined;
  readonly configRoot?: string | undefined;
}

/** Checks every input of a load (docs/explanation/security.md, "Trusted paths"); throws on the first refused. */
export async function assertTrustedInputs(i: TrustedInputs, opts: TrustOptions = {}): Promise<void> {
  await assertTrusted(i.setsDir, 'sets directory', 'tree', opts);
  if (i.overridesFile) await assertTrusted(i.overridesFile, 'overrides file', 'file', opts);
  if (i.templatesDir) await assertTrusted(i.templatesDir, 'templates directory', 'tree', opts);
  if (i.healthchecksDir) await assertTrusted(i.healthchecksDir, 'checks directory', 'tree', opts);
  // spcd creates the config root when it is missing: then the folders above it are what count.
  if (i.configRoot) {
    const there = await assertTrusted(i.configRoot, 'config root', 'dir', { ...opts, optional: true });
    const root = resolve(i.configRoot);
    if (there === undefined) await new Checker(root, 'config root', opts).above(root, true);
  }
}

/** One input `spcctl validate` names, and what it is. */
export interface NamedInput {
  readonly path: string;
  readonly what: string;
  readonly kind: TrustKind;
}

/**
 * `spcctl validate`'s form of the check: each refused input as a problem
 * (file, no line, the typed code), so an operator learns it before the
 * daemon holds. The caller's own uid is accepted as spcd's would be.
 */
export async function trustProblems(
  inputs: readonly NamedInput[],
  opts: TrustOptions = {},
): Promise<SpecProblem[]> {
  const out: SpecProblem[] = [];
  for (const i of inputs) {
    try {
      await assertTrusted(i.path, i.what, i.kind, opts);
    } catch (err) {
      if (!isSpcdError(err)) throw err;
      out.push({ file: i.path, line: 0, path: '', message: err.message, code: err.code });
    }
  }
  return out;
}
