import { readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import nunjucks from 'nunjucks';
import { SpcdError } from '../errors.js';
import { checkTemplateName, isInside, resolveRelative } from './paths.js';

/**
 * A FileSystemLoader that loads only from inside one directory. nunjucks'
 * own containment test is a string prefix on the unresolved path, so a
 * symlink inside the directory could still lead out of it. This loader checks
 * the name (relative, no `..`), then resolves the real path and refuses
 * anything whose real path is outside the real templates directory. Nothing
 * is cached: a reload sees edited templates.
 *
 * Template paths given to nunjucks are the relative names, so its error
 * messages read "(nova/nova.conf.j2) [Line 3, Column 9]".
 */

export const MAX_TEMPLATE_BYTES = 1024 * 1024;

export class SafeTemplateLoader extends nunjucks.FileSystemLoader {
  private readonly root: string;

  constructor(templatesDir: string) {
    super([], { noCache: true, watch: false });
    try {
      this.root = realpathSync(templatesDir);
    } catch (err) {
      throw new SpcdError(
        'TEMPLATE_PATH',
        `templates directory ${templatesDir} cannot be resolved`,
        {
          templatesDir,
        },
        { cause: err },
      );
    }
  }

  /** The real path of a template, or undefined when it does not exist. Throws TEMPLATE_PATH when unsafe. */
  resolveReal(name: string): string | undefined {
    checkTemplateName(name);
    let real: string;
    try {
      real = realpathSync(join(this.root, name));
    } catch {
      return undefined;
    }
    if (!isInside(this.root, real)) {
      throw new SpcdError('TEMPLATE_PATH', `template ${name} resolves outside the templates directory`, {
        template: name,
      });
    }
    return real;
  }

  /** The source text of a template, checked as getSource does. */
  readSource(name: string): string | undefined {
    const real = this.resolveReal(name);
    if (real === undefined) return undefined;
    const st = statSync(real);
    if (!st.isFile()) {
      throw new SpcdError('TEMPLATE_PATH', `template ${name} is not a regular file`, { template: name });
    }
    if (st.size > MAX_TEMPLATE_BYTES) {
      throw new SpcdError('TEMPLATE_INVALID', `template ${name} is over ${MAX_TEMPLATE_BYTES} bytes`, {
        template: name,
      });
    }
    return readFileSync(real, 'utf8');
  }

  override getSource(name: string): nunjucks.LoaderSource {
    const src = this.readSource(name);
    // nunjucks treats null as "not found" and raises its own error.
    if (src === undefined) return null as unknown as nunjucks.LoaderSource;
    return { src, path: name, noCache: true };
  }

  override isRelative(filename: string): boolean {
    return filename.startsWith('./') || filename.startsWith('../');
  }

  override resolve(from: string, to: string): string {
    return resolveRelative(from, to);
  }
}
