/**
 * Where a JSON text first stops being JSON (RFC 8259), as a line and a
 * column, and what was expected there, without quoting any of the text.
 * JSON.parse's own message quotes the text around the fault, and that text
 * may be a secret (a password rendered into a config file, a registry
 * credential): errors name the place instead (docs/explanation/security.md, "Masking").
 */
export interface JsonFault {
  /** 1-based. */
  readonly line: number;
  /** 1-based, in UTF-16 code units of that line. */
  readonly column: number;
  readonly expected: string;
}

class Fault extends Error {
  constructor(
    readonly at: number,
    readonly expected: string,
  ) {
    super(expected);
  }
}

const WS = new Set([' ', '\t', '\n', '\r']);
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;

class Scanner {
  i = 0;
  depth = 0;
  constructor(private readonly t: string) {}

  ws(): void {
    while (this.i < this.t.length && WS.has(this.t[this.i] as string)) this.i++;
  }

  expect(ch: string, what: string): void {
    if (this.t[this.i] !== ch) throw new Fault(this.i, what);
    this.i++;
  }

  value(): void {
    this.ws();
    const c = this.t[this.i];
    if (c === '{') return this.container('}', () => this.member());
    if (c === '[') return this.container(']', () => this.value());
    if (c === '"') return this.string();
    for (const word of ['true', 'false', 'null']) {
      if (this.t.startsWith(word, this.i)) {
        this.i += word.length;
        return;
      }
    }
    NUMBER.lastIndex = this.i;
    if (NUMBER.exec(this.t) === null) throw new Fault(this.i, 'a value');
    this.i = NUMBER.lastIndex;
  }

  member(): void {
    this.ws();
    if (this.t[this.i] !== '"') throw new Fault(this.i, 'a double-quoted property name');
    this.string();
    this.ws();
    this.expect(':', "':' after a property name");
    this.value();
  }

  container(close: string, item: () => void): void {
    // Each level is a call: bound the stack whatever the input's size.
    if (++this.depth > 512) throw new Fault(this.i, 'less nesting (512 levels at most)');
    this.i++;
    this.ws();
    if (this.t[this.i] === close) {
      this.i++;
      this.depth--;
      return;
    }
    for (;;) {
      item();
      this.ws();
      if (this.t[this.i] === ',') {
        this.i++;
        continue;
      }
      this.expect(close, `',' or '${close}'`);
      this.depth--;
      return;
    }
  }

  string(): void {
    this.i++;
    for (;;) {
      const c = this.t[this.i];
      if (c === undefined) throw new Fault(this.i, "the closing '\"' of a string");
      if (c === '"') {
        this.i++;
        return;
      }
      if (c === '\\') {
        ESCAPE.lastIndex = this.i;
        if (ESCAPE.exec(this.t) === null) throw new Fault(this.i, 'a valid escape sequence');
        this.i = ESCAPE.lastIndex;
        continue;
      }
      if (c.charCodeAt(0) < 0x20) throw new Fault(this.i, 'no control character inside a string');
      this.i++;
    }
  }
}

function lineColumn(text: string, at: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = 0; i < at && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      start = i + 1;
    }
  }
  return { line, column: at - start + 1 };
}

/** The first fault of a JSON text, or undefined when it is JSON. */
export function jsonFault(text: string): JsonFault | undefined {
  const s = new Scanner(text);
  try {
    s.value();
    s.ws();
    if (s.i < text.length) throw new Fault(s.i, 'the end of the text');
    return undefined;
  } catch (err) {
    if (!(err instanceof Fault)) throw err;
    return { ...lineColumn(text, err.at), expected: err.expected };
  }
}

/** "line 3, column 14: expected ',' or '}'": a fault as text that quotes nothing of the input. */
export function describeJsonFault(f: JsonFault): string {
  return `line ${f.line}, column ${f.column}: expected ${f.expected}`;
}
