import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { SpcdError, type ErrorCode } from '../errors.js';
import type { DesiredState, SetSpec } from '../model/spec.js';
import { CHECK_NAME, validateTemplate, type CheckLibrary, type CheckTemplate } from './check.js';
import { readOverrides, type Overrides } from './overrides.js';
import { formatProblem, Problems, type SpecProblem } from './problems.js';
import { Reader } from './read.js';
import { validateSetFile, type SetContext } from './set.js';
import { Locator, type Where } from './where.js';
import { parseYaml, YamlProblem } from './yaml.js';

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

  let library: CheckLibrary | undefined;
  if (opts.checkLibraryFile !== undefined) {
    const raw = await readYamlFile(opts.checkLibraryFile, maxBytes, loc, problems);
    if (raw.ok) library = readLibrary(r.withCode('CHECK_INVALID'), raw.value, opts.checkLibraryFile);
  }

  let overrides: Overrides | undefined;
  let overridesOk = true;
  if (opts.overridesFile !== undefined) {
    const raw = await readYamlFile(opts.overridesFile, maxBytes, loc, problems);
    overrides = raw.ok ? readOverrides(r, raw.value, opts.overridesFile) : undefined;
    overridesOk = overrides !== undefined;
  }

  const files = await listSetFiles(opts.setsDir, problems);
  const ctx: SetContext = { library, overrides, usedOverrides: new Set(), containers: new Map() };
  const sets: SetSpec[] = [];
  const setNames = new Map<string, string>();
  let allParsed = files !== undefined;
  for (const file of files ?? []) {
    const raw = await readYamlFile(file, maxBytes, loc, problems);
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

/** stat (size cap) -> read -> parse; every failure becomes a problem. */
async function readYamlFile(
  file: string,
  maxBytes: number,
  loc: Locator,
  problems: Problems,
): Promise<ReadResult> {
  const where = (line = 0): Where => ({ file, line, path: '' });
  let text: string;
  try {
    const st = await stat(file);
    if (!st.isFile()) {
      problems.add(where(), 'is not a regular file', 'SPEC_IO');
      return { ok: false };
    }
    if (st.size > maxBytes) {
      problems.add(where(), `is ${st.size} bytes, larger than the ${maxBytes}-byte cap`, 'SPEC_TOO_LARGE');
      return { ok: false };
    }
    text = await readCapped(file, maxBytes);
  } catch (err) {
    if (err instanceof SpcdError) {
      problems.add(where(), err.message, err.code);
      return { ok: false };
    }
    problems.add(where(), `cannot read: ${ioReason(err)}`, 'SPEC_IO');
    return { ok: false };
  }
  try {
    return { ok: true, value: parseYaml(text, file, loc) };
  } catch (err) {
    if (err instanceof YamlProblem) {
      problems.add(where(err.line), `invalid YAML: ${err.message}`, 'SPEC_YAML');
      return { ok: false };
    }
    throw err;
  }
}

/** Reads at most maxBytes + 1 bytes, so a file that grew after stat is still refused. */
async function readCapped(file: string, maxBytes: number): Promise<string> {
  const fh = await open(file, 'r');
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
