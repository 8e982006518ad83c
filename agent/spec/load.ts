import { constants } from 'node:fs';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative } from 'node:path';
import { SpcdError, type ErrorCode } from '../errors.js';
import type { DesiredState, SetSpec } from '../model/spec.js';
import { CHECK_NAME, validateTemplate, type CheckLibrary, type CheckTemplate } from './check.js';
import { readOverrides, type Overrides } from './overrides.js';
import { formatProblem, Problems, type SpecProblem } from './problems.js';
import { Reader } from './read.js';
import { validateSetFile, type SetContext } from './set.js';
import { Locator, type Where } from './where.js';
import {
  DEFAULT_YAML_LIMITS,
  parseYaml,
  YamlBudget,
  YamlBudgetExceeded,
  YamlProblem,
  type YamlLimits,
} from './yaml.js';

export { formatProblem, type SpecProblem };

export interface LoadOptions {
  /** Directory of *.yaml / *.yml files (not recursive; dot files ignored); each file is one top-level set. */
  setsDir: string;
  /** Per-host override file; when given it must exist. */
  overridesFile?: string;
  /** Named check templates (healthchecks/library.yaml). */
  checkLibraryFile?: string;
  /** Per-file size cap, checked with stat before reading. Default 1 MiB. */
  maxFileBytes?: number;
  /** Budget of one load across all its files (total bytes, YAML nodes, depth); defaults in DEFAULT_YAML_LIMITS. */
  yamlLimits?: Partial<YamlLimits>;
}

export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024;

/** Everything, or a thrown SpcdError carrying details.problems (all of them). Nothing is half-applied. */
export async function loadDesired(opts: LoadOptions): Promise<DesiredState> {
  const { desired, problems } = await validateDir(opts);
  const first = problems[0];
  if (first || !desired) {
    const code: ErrorCode = first?.code ?? 'INTERNAL';
    const more =
      problems.length > 1
        ? ` (and ${problems.length - 1} more problem${problems.length > 2 ? 's' : ''})`
        : '';
    throw new SpcdError(code, first ? `${formatProblem(first)}${more}` : 'definitions did not load', {
      problems,
    });
  }
  return desired;
}

/** Reads and validates every file; never throws for bad input, returns desired only when there are no problems. */
export async function validateDir(
  opts: LoadOptions,
): Promise<{ desired?: DesiredState; problems: SpecProblem[] }> {
  const maxBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const problems = new Problems();
  const loc = new Locator();
  const r = new Reader(loc, problems);
  const budget = new YamlBudget({ ...DEFAULT_YAML_LIMITS, ...opts.yamlLimits });
  const read = (file: string, within?: string): Promise<ReadResult> =>
    readYamlFile({ file, maxBytes, loc, problems, budget, ...(within !== undefined ? { within } : {}) });

  let library: CheckLibrary | undefined;
  if (opts.checkLibraryFile !== undefined) {
    const raw = await read(opts.checkLibraryFile);
    if (raw.ok) library = readLibrary(r.withCode('CHECK_INVALID'), raw.value, opts.checkLibraryFile);
  }

  let overrides: Overrides | undefined;
  let overridesOk = true;
  if (opts.overridesFile !== undefined) {
    const raw = await read(opts.overridesFile);
    overrides = raw.ok ? readOverrides(r, raw.value, opts.overridesFile) : undefined;
    overridesOk = overrides !== undefined;
  }

  const files = await listSetFiles(opts.setsDir, problems);
  const ctx: SetContext = { library, overrides, usedOverrides: new Set(), containers: new Map() };
  const sets: SetSpec[] = [];
  const setNames = new Map<string, string>();
  let allParsed = files !== undefined;
  const setsDirReal = files === undefined ? undefined : await realpath(opts.setsDir).catch(() => undefined);
  for (const file of files ?? []) {
    // a set file may be a symlink only to a file inside the sets directory
    const raw = await read(file, setsDirReal ?? opts.setsDir);
    if (!raw.ok) {
      allParsed = false;
      continue;
    }
    const set = validateSetFile(r, raw.value, file, ctx);
    if (!set) continue;
    const first = setNames.get(set.name);
    if (first !== undefined) {
      const w = r.child(raw.value, 'set', { file, line: 0, path: '' });
      r.fail(w, `set name "${set.name}" is already used by ${first}`);
      continue;
    }
    setNames.set(set.name, file);
    sets.push(set);
  }

  // Override entries must name real containers; only meaningful once every set file parsed.
  if (overrides && allParsed) {
    for (const [name, ov] of overrides.containers) {
      if (!ctx.usedOverrides.has(name) && !ctx.containers.has(name)) {
        r.fail(ov.where, `no container named ${name} is defined in ${opts.setsDir}`);
      }
    }
  }

  if (problems.count > 0 || !overridesOk || files === undefined)
    return { problems: byFileAndLine(problems.list) };
  const desired: DesiredState = {
    sets,
    ...(overrides?.values ? { hostValues: overrides.values } : {}),
  };
  return { desired, problems: [] };
}

/** Stable: files in the order they were read, then by line. */
function byFileAndLine(list: readonly SpecProblem[]): SpecProblem[] {
  const order = new Map<string, number>();
  for (const p of list) if (!order.has(p.file)) order.set(p.file, order.size);
  return [...list].sort((a, b) => (order.get(a.file) ?? 0) - (order.get(b.file) ?? 0) || a.line - b.line);
}

function readLibrary(r: Reader, raw: unknown, file: string): CheckLibrary | undefined {
  const root: Where = { file, line: r.loc.info(raw)?.line ?? 1, path: '' };
  const m = r.mapping(raw, root, ['checks']);
  if (!m) return undefined;
  if (m.checks === undefined) {
    r.fail(root, 'checks is required');
    return undefined;
  }
  const cw = r.child(m, 'checks', root);
  const checks = r.mapping(m.checks, cw);
  if (!checks) return undefined;
  const library = new Map<string, CheckTemplate>();
  for (const name of Object.keys(checks)) {
    const w = r.child(checks, name, cw);
    if (!CHECK_NAME.test(name)) {
      r.fail(w, `${JSON.stringify(name)} is not a check name ([a-z0-9][a-z0-9_.-]*)`);
      continue;
    }
    const t = validateTemplate(r, name, checks[name], w);
    if (t) library.set(name, t);
  }
  return library;
}

async function listSetFiles(dir: string, problems: Problems): Promise<string[] | undefined> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries
      .filter((e) => !e.name.startsWith('.') && /\.ya?ml$/.test(e.name) && (e.isFile() || e.isSymbolicLink()))
      .map((e) => e.name)
      .sort()
      .map((name) => join(dir, name));
  } catch (err) {
    problems.add({ file: dir, line: 0, path: '' }, `cannot read the directory: ${ioReason(err)}`, 'SPEC_IO');
    return undefined;
  }
}

type ReadResult = { ok: true; value: unknown } | { ok: false };

interface ReadRequest {
  readonly file: string;
  readonly maxBytes: number;
  readonly loc: Locator;
  readonly problems: Problems;
  readonly budget: YamlBudget;
  /** When set, the file (after following symlinks) must lie inside this directory. */
  readonly within?: string;
}

/** Where a symlink leads, when that is outside `dir`: such a file is refused unread, so its lines are never echoed. */
async function resolveWithin(file: string, dir: string): Promise<{ real: string; outside: boolean }> {
  const real = await realpath(file);
  const rel = relative(dir, real);
  return { real, outside: rel === '' || rel.startsWith('..') || isAbsolute(rel) };
}

/** (symlink check) -> stat (size cap, load budget) -> read -> parse (node budget); every failure becomes a problem. */
async function readYamlFile(req: ReadRequest): Promise<ReadResult> {
  const { file, maxBytes, loc, problems, budget } = req;
  const where = (line = 0): Where => ({ file, line, path: '' });
  let text: string;
  try {
    let path = file;
    if (req.within !== undefined) {
      const target = await resolveWithin(file, req.within);
      if (target.outside) {
        problems.add(
          where(),
          `is a symbolic link to a file outside ${req.within}; refused without reading it`,
          'SPEC_IO',
        );
        return { ok: false };
      }
      path = target.real;
    }
    const st = await stat(path);
    if (!st.isFile()) {
      problems.add(where(), 'is not a regular file', 'SPEC_IO');
      return { ok: false };
    }
    if (st.size > maxBytes) {
      problems.add(where(), `is ${st.size} bytes, larger than the ${maxBytes}-byte cap`, 'SPEC_TOO_LARGE');
      return { ok: false };
    }
    const overTotal = budget.takeBytes(st.size);
    if (overTotal !== undefined) {
      problems.add(where(), overTotal, 'SPEC_TOO_LARGE');
      return { ok: false };
    }
    text = await readCapped(path, maxBytes, req.within !== undefined);
  } catch (err) {
    if (err instanceof SpcdError) {
      problems.add(where(), err.message, err.code);
      return { ok: false };
    }
    problems.add(where(), `cannot read: ${ioReason(err)}`, 'SPEC_IO');
    return { ok: false };
  }
  try {
    return { ok: true, value: parseYaml(text, file, loc, budget) };
  } catch (err) {
    if (err instanceof YamlBudgetExceeded) {
      problems.add(where(err.line), err.message, 'SPEC_TOO_LARGE');
      return { ok: false };
    }
    if (err instanceof YamlProblem) {
      problems.add(where(err.line), `invalid YAML: ${err.message}`, 'SPEC_YAML');
      return { ok: false };
    }
    throw err;
  }
}

/** Reads at most maxBytes + 1 bytes, so a file that grew after stat is still refused. */
async function readCapped(file: string, maxBytes: number, noFollow: boolean): Promise<string> {
  // the resolved path is opened without following a link swapped in since the check
  const fh = await open(file, noFollow ? constants.O_RDONLY | constants.O_NOFOLLOW : 'r');
  try {
    const buf = Buffer.alloc(maxBytes + 1);
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, total, buf.length - total, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > maxBytes)
        throw new SpcdError('SPEC_TOO_LARGE', `grew past the ${maxBytes}-byte cap while being read`);
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, total));
    } catch {
      throw new SpcdError('SPEC_YAML', 'is not valid UTF-8 text');
    }
  } finally {
    await fh.close();
  }
}

function ioReason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e && typeof e.code === 'string') return `${e.code} ${e.message}`;
  return err instanceof Error ? err.message : String(err);
}
