/** `--output json|yaml|wide`: the API's answer as JSON or YAML, or the table (wide: with more columns). */
import { dump } from 'js-yaml';
import type { OutputFormat } from './args.js';

export interface Tables {
  /** The default table. */
  readonly table: () => string;
  /** The same rows with more columns; only for commands whose outputs include 'wide'. */
  readonly wide?: () => string;
}

/** YAML of a JSON value: the same keys and values as the JSON form, block style, no anchors. */
export function toYaml(value: unknown): string {
  return dump(value, { noRefs: true, lineWidth: -1, sortKeys: false });
}

/** The text one answer prints as, in the form parse() accepted for the command. */
export function render(form: OutputFormat, body: unknown, tables: Tables): string {
  switch (form) {
    case 'json':
      return JSON.stringify(body, null, 2) + '\n';
    case 'yaml':
      return toYaml(body);
    case 'wide':
      return (tables.wide ?? tables.table)();
    case 'table':
      return tables.table();
  }
}

/** One streamed item (an event): JSON as one line, YAML as one document. */
export function renderItem(form: 'json' | 'yaml', line: string, value: unknown): string {
  return form === 'json' ? line + '\n' : '---\n' + toYaml(value);
}
