/** `spcctl generations NAME --diff A B`: what changed from generation A to B. */
import type { GenerationDiffView } from '../api/types.js';
import { escapeControl } from '../model/text.js';
import { intOption } from './args.js';
import type { CommandContext } from './commands.js';
import { CliError, EXIT, type ExitCode } from './exit.js';
import { render } from './output.js';

const shown = (v: unknown): string => (v === undefined ? '(absent)' : JSON.stringify(v));
const short = (h: string | null): string => (h === null ? '-' : h.slice(0, 12));

/** The human form: one line per changed field and file, then each file's unified diff. */
export function formatGenerationDiff(d: GenerationDiffView): string {
  const lines: string[] = [`${d.name}: generation ${d.from.generation} -> ${d.to.generation}`];
  if (d.image) lines.push(`image:   ${d.image.from} -> ${d.image.to}`);
  if (d.imageDigest) lines.push(`digest:  ${d.imageDigest.from ?? '-'} -> ${d.imageDigest.to ?? '-'}`);
  // the image has its own line above
  const fields = d.spec.filter((c) => !(d.image && c.path === 'image'));
  if (fields.length > 0) {
    lines.push('spec:');
    for (const c of fields) lines.push(`  ${c.path}: ${shown(c.from)} -> ${shown(c.to)}`);
  }
  const cfg = d.config;
  if (cfg.changed) {
    lines.push(`config:  ${d.from.configHash} -> ${d.to.configHash}`);
    for (const f of cfg.files)
      lines.push(`  ${f.change.padEnd(8)}  ${f.path}  ${short(f.fromSha256)} -> ${short(f.toSha256)}`);
    if (!cfg.filesKnown)
      lines.push(
        '  (which files changed is not known: a generation predates the file list and its version is gone)',
      );
  }
  if (lines.length === 1) lines.push('no difference');
  let out = lines.map((l) => escapeControl(l)).join('\n') + '\n';
  for (const f of cfg.files) {
    if (f.diff === undefined) continue;
    const text = f.diff.endsWith('\n') ? f.diff : f.diff + '\n';
    out += '\n' + escapeControl(text, { keepLines: true });
  }
  return out;
}

/** Generation numbers given after NAME: integers >= 1, named in the error. */
function generationArg(value: string | undefined, which: 'A' | 'B'): number {
  const n = intOption({ v: value }, 'v', 1, `--diff ${which}`);
  if (n === undefined) throw new CliError(`--diff needs two generations: --diff A B`, EXIT.USAGE);
  return n;
}

export async function generationDiff(ctx: CommandContext): Promise<ExitCode> {
  const [name, a, b] = ctx.args.positionals;
  const from = generationArg(a, 'A');
  const to = generationArg(b, 'B');
  const { body } = await ctx
    .client()
    .call<GenerationDiffView>(
      'GET',
      `/v1/containers/${encodeURIComponent(name as string)}/generations/diff?from=${from}&to=${to}`,
    );
  const table = (): string => formatGenerationDiff(body);
  ctx.io.stdout.write(render(ctx.args.output, body, { table }));
  return EXIT.OK;
}
