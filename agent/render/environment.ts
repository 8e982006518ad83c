import yaml from 'js-yaml';
import nunjucks from 'nunjucks';
import type { SafeTemplateLoader } from './loader.js';

/**
 * One nunjucks Environment per Renderer (no module-level singleton):
 * - throwOnUndefined: printing an undefined or null value is an error;
 * - autoescape off: these are config files, not HTML;
 * - trimBlocks + lstripBlocks: a line holding only a {% tag %} leaves no
 *   blank line behind, as Ansible's default does for kolla-ansible templates;
 * - dev: keep nunjucks' TemplateError (with lineno/colno) instead of a plain
 *   Error carrying only the message.
 *
 * Filters for serialized formats:
 * - to_json(indent?): JSON.stringify; also the right way to put a scalar into
 *   a YAML file (JSON is YAML), since it quotes and escapes;
 * - to_yaml: js-yaml dump, no anchors, no line folding, trailing newline cut;
 * - conf_string: a double-quoted string for libvirt's own conf syntax
 *   (libvirtd.conf, qemu.conf), which has no escapes: a value holding a
 *   double quote or a line break is refused.
 */
/** Thrown by spcd's filters; nunjucks gives filter errors no line, so the renderer looks for the filter's use in the template. */
export class FilterError extends Error {
  constructor(
    readonly filter: string,
    message: string,
  ) {
    super(`${filter}: ${message}`);
    this.name = 'FilterError';
  }
}

export function createEnvironment(loader: SafeTemplateLoader): nunjucks.Environment {
  const env = new nunjucks.Environment(loader, {
    autoescape: false,
    throwOnUndefined: true,
    trimBlocks: true,
    lstripBlocks: true,
    dev: true,
  });
  env.addFilter('to_json', (value: unknown, indent?: number) => {
    if (value === undefined) throw new FilterError('to_json', 'the value is undefined');
    return JSON.stringify(value, null, indent);
  });
  env.addFilter('to_yaml', (value: unknown) => {
    if (value === undefined) throw new FilterError('to_yaml', 'the value is undefined');
    return yaml.dump(value, { noRefs: true, lineWidth: -1 }).replace(/\n$/, '');
  });
  env.addFilter('conf_string', (value: unknown) => {
    if (value === undefined || value === null) throw new FilterError('conf_string', 'the value is undefined');
    const text = String(value);
    // eslint-disable-next-line no-control-regex
    if (/["\r\n\u0000]/.test(text))
      throw new FilterError('conf_string', 'the value holds a double quote or a line break');
    return `"${text}"`;
  });
  return env;
}
