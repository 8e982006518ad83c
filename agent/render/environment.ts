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
 * - required(name): the value itself, or an error naming the value when it is
 *   undefined, null, an empty string or an empty list: for the values a
 *   shipped set has no safe default for (a host's own address, the control
 *   plane's), and for lists a loop would otherwise silently skip.
 */
/** Thrown by spcd's filters; nunjucks gives filter errors no line, so the renderer looks for the filter's use in the template. */
export class FilterError extends Error {
  constructor(
    readonly filter: string,
    message: string,
    /** Text that marks this use of the filter in the template (its argument), to find its line. */
    readonly use?: string,
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
  env.addFilter('one_line', (value: unknown) => {
    if (value === undefined || value === null) throw new FilterError('one_line', 'the value is undefined');
    const text = String(value);
    // eslint-disable-next-line no-control-regex
    if (/[\r\n\u0000]/.test(text)) throw new FilterError('one_line', 'the value holds a line break');
    return text;
  });
  env.addFilter('required', (value: unknown, name?: unknown) => {
    const what = typeof name === 'string' && name !== '' ? name : 'this value';
    const empty =
      value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0);
    if (empty) {
      throw new FilterError(
        'required',
        `${what} is required and has no value: set it in the globals or in the host's values (it has no safe default)`,
        typeof name === 'string' ? JSON.stringify(name) : undefined,
      );
    }
    return value;
  });
  return env;
}
