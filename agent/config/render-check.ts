import { tmpdir } from 'node:os';
import { SpcdError } from '../errors.js';
import { silentLogger } from '../log.js';
import { allContainers, hasKollaConfig, type DesiredState } from '../model/spec.js';
import type { SpecProblem } from '../spec/problems.js';
import { TemplateConfig, type ValueFiles } from './template-config.js';

/**
 * `spcctl validate` with values: every container with config is rendered
 * as the daemon would render it (set defaults, globals, host values,
 * secrets) and nothing is written. A value a template requires and no file
 * gives (a host's own address has no safe default) is a problem at the
 * container's line of its set file, naming the value and the template.
 */
export async function renderProblems(
  desired: DesiredState,
  opts: { templatesDir: string } & ValueFiles,
): Promise<SpecProblem[]> {
  const config = new TemplateConfig({
    templatesDir: opts.templatesDir,
    // Nothing is written: render() only reads templates.
    configRoot: tmpdir(),
    files: { globalsFile: opts.globalsFile, secretsFile: opts.secretsFile },
    log: silentLogger(),
  });
  try {
    await config.load(desired);
  } catch (err) {
    const file = opts.secretsFile ?? opts.globalsFile ?? '';
    return [problemOf(err, file, 0, '')];
  }
  const out: SpecProblem[] = [];
  for (const spec of allContainers(desired.sets).filter(hasKollaConfig)) {
    try {
      config.render(spec);
    } catch (err) {
      const { file, line } = splitSource(spec.source);
      out.push(problemOf(err, file, line, `containers.${spec.name}.config`));
    }
  }
  return out;
}

function problemOf(err: unknown, file: string, line: number, path: string): SpecProblem {
  if (err instanceof SpcdError) return { file, line, path, message: err.message, code: err.code };
  return { file, line, path, message: String(err), code: 'INTERNAL' };
}

/** "container-sets/compute.yaml:12" -> its file and line (0 when it has none). */
function splitSource(source: string): { file: string; line: number } {
  const m = /^(.*):(\d+)$/.exec(source);
  return m ? { file: m[1] ?? source, line: Number(m[2]) } : { file: source, line: 0 };
}
