import type nunjucks from 'nunjucks';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import { CONFIG_HASH_SCHEME, NO_CONFIG_HASH } from '../model/hash.js';
import { configHash } from './config-hash.js';
import { hasKollaConfig, type ConfigFileSpec, type ContainerSpec } from '../model/spec.js';
import { createEnvironment, FilterError } from './environment.js';
import { dottedPath, findLineBreakingValues, parseBackProblem, withSanitized } from './formats.js';
import { buildKollaConfigJson, CONFIG_JSON, normalizeMode, normalizeOwner } from './kolla.js';
import { SafeTemplateLoader } from './loader.js';
import { maskSecrets } from './mask.js';
import { checkContainerName, checkContainerPath, checkDest, checkTemplateName } from './paths.js';

/**
 * Renders a container's config files and its kolla config.json in memory.
 * Nothing touches the disk here except reading templates; writer.ts does the
 * atomic switch. Every error is a SpcdError (TEMPLATE_INVALID or
 * TEMPLATE_PATH) whose message names the container, the template and, when
 * nunjucks knows it, the line; secret values are masked out of messages.
 */

export interface RenderedFile {
  /** Relative to the container's config directory (and to /var/lib/kolla/config_files). */
  dest: string;
  containerPath: string;
  owner: string;
  mode: string;
  content: string;
  optional?: boolean;
  merge?: boolean;
  preserveProperties?: boolean;
}

export interface RenderedConfig {
  files: RenderedFile[];
  /** Kolla's config.json; '' when the container has no config files. */
  configJson: string;
  /** 'v1-<sha256 hex>' over every file's dest, owner, mode, content and config.json (config-hash.ts); 'none' without config. */
  hash: string;
}

export { configHash, CONFIG_HASH_SCHEME, NO_CONFIG_HASH };

/** dest -> content, plus config.json: the same keys readCurrentConfig returns. */
export function renderedFileMap(rendered: RenderedConfig): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of rendered.files) out.set(f.dest, f.content);
  if (rendered.configJson) out.set(CONFIG_JSON, rendered.configJson);
  return out;
}

interface TemplateErrorLike {
  lineno?: unknown;
  colno?: unknown;
  cause?: unknown;
  message?: unknown;
}

function findInChain<T>(err: unknown, type: abstract new (...args: never[]) => T): T | undefined {
  let cur: unknown = err;
  for (let i = 0; i < 8 && cur; i++) {
    if (cur instanceof type) return cur;
    cur = (cur as TemplateErrorLike).cause;
  }
  return undefined;
}

const HEADER = /^\(([^()]*)\)( \[Line \d+(, Column \d+)?\])?$/;

export class Renderer {
  private readonly loader: SafeTemplateLoader;
  private readonly env: nunjucks.Environment;
  private readonly log: Logger;

  constructor(opts: { templatesDir: string; log: Logger }) {
    this.loader = new SafeTemplateLoader(opts.templatesDir);
    this.env = createEnvironment(this.loader);
    this.log = opts.log;
  }

  renderContainer(
    spec: ContainerSpec,
    values: Record<string, unknown>,
    secretValues: Set<string>,
  ): RenderedConfig {
    if (!hasKollaConfig(spec)) return { files: [], configJson: '', hash: NO_CONFIG_HASH };
    checkContainerName(spec.name);
    const seen = new Set<string>([CONFIG_JSON]);
    const files: RenderedFile[] = [];
    for (const f of spec.config) {
      checkTemplateName(f.template);
      checkDest(f.dest, spec.name);
      if (seen.has(f.dest)) {
        throw new SpcdError(
          'TEMPLATE_PATH',
          `container ${spec.name}: config dest ${f.dest} is used twice (config.json is reserved)`,
          { container: spec.name, dest: f.dest },
        );
      }
      seen.add(f.dest);
      const containerPath = checkContainerPath(f.containerPath, spec.name);
      const owner = normalizeOwner(f.owner, spec.name);
      const mode = normalizeMode(f.mode, spec.name);
      const content = this.renderFile(spec.name, f, values, secretValues);
      files.push({
        dest: f.dest,
        containerPath,
        owner,
        mode,
        content,
        ...(f.optional ? { optional: true } : {}),
        ...(f.merge ? { merge: true } : {}),
        ...(f.preserveProperties ? { preserveProperties: true } : {}),
      });
    }
    const configJson = buildKollaConfigJson(spec, files);
    const hash = configHash(files, configJson);
    this.log.debug({ container: spec.name, hash, files: files.map((f) => f.dest) }, 'rendered config');
    return { files, configJson, hash };
  }

  private renderFile(
    container: string,
    f: ConfigFileSpec,
    values: Record<string, unknown>,
    secrets: Set<string>,
  ): string {
    const content = this.renderTemplate(container, f.template, values, secrets);
    if (f.format === 'ini') this.checkIni(container, f.template, values, content, secrets);
    if (f.format === 'yaml' || f.format === 'json') {
      const problem = parseBackProblem(f.format, content);
      if (problem !== undefined) {
        throw new SpcdError(
          'TEMPLATE_INVALID',
          maskSecrets(
            `container ${container}: template ${f.template} did not render valid ${f.format.toUpperCase()}: ${problem} (use the to_${f.format} filter for values)`,
            secrets,
          ),
          { container, template: f.template, format: f.format },
        );
      }
    }
    return content;
  }

  /**
   * A value with a line break is refused only when it reaches the output: the
   * template is rendered again with just that value's line breaks turned into
   * spaces, and if the text differs the value was used. A certificate in the
   * globals therefore does not block every INI file of the host, only the
   * ones that print it.
   */
  private checkIni(
    container: string,
    template: string,
    values: Record<string, unknown>,
    content: string,
    secrets: Set<string>,
  ): void {
    for (const unsafe of findLineBreakingValues(values)) {
      let other: string | undefined;
      try {
        other = this.renderTemplate(container, template, withSanitized(values, unsafe), secrets);
      } catch {
        other = undefined;
      }
      if (other !== content) {
        const path = dottedPath(unsafe.segments);
        throw new SpcdError(
          'TEMPLATE_INVALID',
          `container ${container}: template ${template} is an INI file and the ${unsafe.kind} at ${path} contains a line break or NUL, which would break its line`,
          { container, template, path },
        );
      }
    }
  }

  private renderTemplate(
    container: string,
    template: string,
    values: Record<string, unknown>,
    secrets: Set<string>,
  ): string {
    try {
      return this.env.render(template, values);
    } catch (err) {
      throw this.mapError(container, template, err, secrets);
    }
  }

  private mapError(container: string, template: string, err: unknown, secrets: Set<string>): SpcdError {
    const typed = findInChain(err, SpcdError);
    if (typed) return typed;
    const e = (err ?? {}) as TemplateErrorLike;
    const raw = typeof e.message === 'string' ? e.message : String(err);
    let line = typeof e.lineno === 'number' && e.lineno > 0 ? e.lineno : undefined;
    const column = typeof e.colno === 'number' && e.colno > 0 ? e.colno : undefined;
    // nunjucks prefixes one "(name)" line per template level, outermost first;
    // the last is the template the error happened in (an include may differ
    // from the one rendered), and only it carries "[Line n, Column c]".
    const lines = raw.split('\n').map((l) => l.trim());
    const headers = lines.map((l) => HEADER.exec(l)?.[1]).filter((h): h is string => h !== undefined);
    let inner = headers[headers.length - 1] || template;
    const filterErr = findInChain(err, FilterError);
    // A filter's own message says it all; nunjucks' wrapping only repeats template names.
    const reason = filterErr?.message ?? lines.filter((l) => l.length > 0 && !HEADER.test(l)).join(' ');
    let hint = '';
    if (filterErr) {
      // nunjucks does not track lines for filter calls, and after an include
      // it may name the included template: find the filter's uses, in the
      // template it names first, then in the one rendered.
      const found = [inner, template]
        .map((t) => ({ t, uses: this.linesUsing(t, filterErr.filter, filterErr.use) }))
        .find((c) => c.uses.length > 0);
      if (found) inner = found.t;
      const uses = found?.uses ?? [];
      if (uses.length === 1) line = uses[0];
      else if (uses.length > 1) hint = ` (${filterErr.filter} is used on lines ${uses.join(', ')})`;
    }
    const sourceLine = line !== undefined ? this.sourceLine(inner, line) : undefined;
    const at = line !== undefined ? `, line ${line}${column !== undefined ? `, column ${column}` : ''}` : '';
    const msg =
      `container ${container}: template ${inner}${inner !== template ? ` (included from ${template})` : ''}${at}: ` +
      `${reason}${hint}${sourceLine ? `: ${sourceLine}` : ''}`;
    return new SpcdError(
      'TEMPLATE_INVALID',
      maskSecrets(msg, secrets),
      {
        container,
        template: inner,
        renderedTemplate: template,
        ...(line ? { line } : {}),
        ...(column ? { column } : {}),
      },
      { cause: err },
    );
  }

  /** Lines of a template that use the filter (and hold `use`, when given: the filter's own argument). */
  private linesUsing(template: string, filter: string, use?: string): number[] {
    try {
      const re = new RegExp(`\\|\\s*${filter}\\b`);
      const out: number[] = [];
      (this.loader.readSource(template) ?? '').split('\n').forEach((l, i) => {
        if (re.test(l) && (use === undefined || l.includes(use))) out.push(i + 1);
      });
      return out;
    } catch {
      return [];
    }
  }

  private sourceLine(template: string, line: number): string | undefined {
    try {
      const text = this.loader.readSource(template)?.split('\n')[line - 1]?.trim();
      return text ? (text.length > 200 ? `${text.slice(0, 200)}...` : text) : undefined;
    } catch {
      return undefined;
    }
  }
}
