/**
 * Source positions for parsed YAML values. Every mapping and sequence the
 * loader builds (or merges, for overrides and check templates) is registered
 * here, so a problem found deep in a value can name the file, the 1-based line
 * and the dotted path of the field, even when the field came from another file.
 */

/** Where a value sits: file, 1-based line (0 when unknown) and dotted path inside that file. */
export interface Where {
  readonly file: string;
  readonly line: number;
  readonly path: string;
}

/** Position of one key of a mapping; file/path set only when it differs from the parent's. */
export interface KeyPos {
  readonly line: number;
  readonly file?: string;
  readonly path?: string;
}

export interface NodeInfo {
  readonly file: string;
  readonly line: number;
  readonly keys?: ReadonlyMap<string, KeyPos>;
  readonly items?: readonly number[];
}

const SIMPLE_KEY = /^[A-Za-z0-9_-]+$/;

/** Appends a key or index to a dotted path: `a.b`, `a[2]`, `a["x.y"]`. */
export function joinPath(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  const part = SIMPLE_KEY.test(key) ? key : `[${JSON.stringify(key)}]`;
  if (base === '') return part.startsWith('[') ? part : part;
  return part.startsWith('[') ? `${base}${part}` : `${base}.${part}`;
}

export class Locator {
  private readonly infos = new WeakMap<object, NodeInfo>();

  register(node: object, info: NodeInfo): void {
    this.infos.set(node, info);
  }

  info(node: unknown): NodeInfo | undefined {
    return node !== null && typeof node === 'object' ? this.infos.get(node) : undefined;
  }

  /** Where the child `key` of `parent` (which sits at `where`) is. */
  child(parent: unknown, key: string | number, where: Where): Where {
    const info = this.info(parent);
    const path = joinPath(where.path, key);
    if (!info) return { file: where.file, line: where.line, path };
    if (typeof key === 'number') {
      const line = info.items?.[key] ?? info.line;
      return { file: info.file, line, path };
    }
    const pos = info.keys?.get(key);
    if (!pos) return { file: info.file, line: info.line, path };
    return { file: pos.file ?? info.file, line: pos.line, path: pos.path ?? path };
  }

  /** Position of `key` inside `parent`, as a KeyPos usable in a merged mapping. */
  keyPos(parent: unknown, key: string, where: Where): KeyPos {
    const w = this.child(parent, key, where);
    return { line: w.line, file: w.file, path: w.path };
  }
}
