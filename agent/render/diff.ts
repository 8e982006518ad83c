import { diffLines, formatHunks, splitLines, type LineOp } from './line-diff.js';
import { MASK, maskSecrets } from './mask.js';

/**
 * What `spcctl plan` shows for a container's config: a unified-style diff per
 * file that changes, with every secret value replaced by '******'.
 *
 * The old files may hold secrets that are no longer in the secrets file (a
 * rotated password). To keep those out of the plan as well:
 * - a line of the old file whose key (the text before the first '=' or ':')
 *   is the key of a line that holds a secret in the new file is shown as
 *   "<key> = ******";
 * - a removed file is listed without its content;
 * - the lines inside a PEM private key block ("-----BEGIN ... PRIVATE
 *   KEY-----" to its END line) of either side are masked whole, whether or
 *   not the key is still in the secrets file (a rotated key).
 */

export interface FileDiff {
  /** Relative to the container's config directory ("nova.conf", "config.json"). */
  path: string;
  change: 'added' | 'removed' | 'modified';
  /** "--- a/<path>\n+++ b/<path>\n@@ ... @@\n..." ; secrets masked. */
  diff: string;
}

const KEY = /^\s*([^=:#;\s][^=:]*?)\s*([=:])/;

function keyOf(line: string): { key: string; sep: string; prefix: string } | undefined {
  const m = KEY.exec(line);
  if (!m || m[1] === undefined || m[2] === undefined) return undefined;
  return { key: m[1], sep: m[2], prefix: line.slice(0, m.index + m[0].length) };
}

function secretKeys(lines: readonly string[], secrets: Set<string>): Set<string> {
  const keys = new Set<string>();
  for (const line of lines) {
    if (maskSecrets(line, secrets) === line) continue;
    const k = keyOf(line);
    if (k) keys.add(k.key);
  }
  return keys;
}

const PEM_BEGIN = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/;
const PEM_END = /-----END [A-Z0-9 ]*PRIVATE KEY-----/;

/** The lines (trimmed) between a private key's BEGIN and END markers. */
function privateKeyLines(text: string | undefined, out: Set<string>): Set<string> {
  let inside = false;
  for (const line of splitLines(text ?? '')) {
    if (PEM_BEGIN.test(line)) inside = true;
    else if (PEM_END.test(line)) inside = false;
    else if (inside && line.trim().length > 0) out.add(line.trim());
  }
  return out;
}

function maskOp(
  op: LineOp,
  secrets: Set<string>,
  keys: Set<string>,
  anyKind: boolean,
  pem: Set<string>,
): LineOp {
  if (pem.has(op.text.trim()))
    return { kind: op.kind, text: `${op.text.slice(0, op.text.search(/\S|$/))}${MASK}` };
  let text = maskSecrets(op.text, secrets);
  if ((anyKind || op.kind === '-') && text === op.text) {
    const k = keyOf(op.text);
    if (k && keys.has(k.key)) text = `${k.prefix} ${MASK}`;
  }
  return { kind: op.kind, text };
}

/**
 * `bothWays`: neither side is known to hold only current secrets (a diff
 * between two past generations, in either order): a line on either side
 * whose key holds a secret in either file is masked.
 */
export function diffConfigs(
  oldFiles: Map<string, string> | undefined,
  newFiles: Map<string, string>,
  secretValues: Set<string>,
  opts: { bothWays?: boolean } = {},
): FileDiff[] {
  const old = oldFiles ?? new Map<string, string>();
  const paths = [...new Set([...old.keys(), ...newFiles.keys()])].sort();
  const out: FileDiff[] = [];
  for (const path of paths) {
    const before = old.get(path);
    const after = newFiles.get(path);
    if (before === after) continue;
    if (after === undefined) {
      const n = splitLines(before ?? '').length;
      out.push({
        path,
        change: 'removed',
        diff: `--- a/${path}\n+++ /dev/null\n(removed, ${n} lines; content not shown)\n`,
      });
      continue;
    }
    const newLines = splitLines(after);
    const oldLines = before === undefined ? [] : splitLines(before);
    const bothWays = opts.bothWays === true;
    const keys = secretKeys(bothWays ? [...newLines, ...oldLines] : newLines, secretValues);
    const pem = privateKeyLines(after, privateKeyLines(before, new Set()));
    const ops = diffLines(oldLines, newLines).map((op) => maskOp(op, secretValues, keys, bothWays, pem));
    const header = [before === undefined ? '--- /dev/null' : `--- a/${path}`, `+++ b/${path}`];
    const hunks = formatHunks(ops);
    if (hunks.length === 0) hunks.push('(only the trailing newline differs)');
    out.push({
      path,
      change: before === undefined ? 'added' : 'modified',
      diff: `${[...header, ...hunks].join('\n')}\n`,
    });
  }
  return out;
}
