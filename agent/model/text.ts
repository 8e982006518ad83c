/**
 * Text that came from a user or a container (a YAML key, a check's output, an
 * engine message) is shown with its control characters escaped, so an ANSI
 * sequence cannot repaint a terminal and a CR or LF cannot forge a line in a
 * CLI table, an error or a log. The one helper every such message uses.
 */

/**
 * C0 controls, DEL, C1 controls, the Unicode line/paragraph separators and the
 * bidirectional overrides (which reorder what a terminal shows).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const UNSAFE_KEEP_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(ch: string): string {
  const named = NAMED[ch];
  if (named !== undefined) return named;
  const code = ch.charCodeAt(0);
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Escapes every control character as \n, \r, \t, \xNN or \uNNNN, so the result
 * is one line of printable text. With keepLines, LF and TAB stay as they are
 * (multi-line output kept readable) and everything else is escaped.
 */
export function escapeControl(text: string, opts: { keepLines?: boolean } = {}): string {
  return text.replace(opts.keepLines ? UNSAFE_KEEP_LINES : UNSAFE, escapeOne);
}
