import yaml from 'js-yaml';
import type { Locator } from './where.js';

/**
 * Parses one YAML document with the core schema (no timestamps, no merge keys,
 * no binary) and records, through js-yaml's node listener, the line of every
 * mapping key and sequence item into the Locator. Anchors are refused outright
 * (and so aliases can never resolve): expanding aliases is how a small file
 * becomes a huge value (CVE-2019-11253).
 */

export class YamlProblem extends Error {
  constructor(
    message: string,
    /** 1-based; 0 when unknown. */
    readonly line: number,
  ) {
    super(message);
    this.name = 'YamlProblem';
  }
}

interface Child {
  readonly result: unknown;
  readonly line: number;
  readonly children: readonly Child[];
}

interface Frame {
  readonly start: number;
  readonly children: Child[];
}

/** The parts of js-yaml's loader state the listener reads. */
interface ListenerState {
  readonly position: number;
  readonly result: unknown;
  readonly anchor: string | null;
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  return starts;
}

/** 1-based line of a character offset. */
function lineAt(starts: readonly number[], pos: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** First offset at or after `pos` that is not blank space or a comment. */
function skipBlank(text: string, pos: number): number {
  let i = pos;
  while (i < text.length) {
    const ch = text[i];
    if (ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n') i++;
    else if (ch === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else break;
  }
  return i;
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function parseYaml(text: string, file: string, locator: Locator): unknown {
  const starts = lineStarts(text);
  const stack: Frame[] = [];
  const roots: Child[] = [];

  const listener = (event: 'open' | 'close', state: ListenerState): void => {
    if (event === 'open') {
      stack.push({ start: state.position, children: [] });
      return;
    }
    const frame = stack.pop();
    if (!frame) return;
    const line = lineAt(starts, skipBlank(text, frame.start));
    if (state.anchor !== null) {
      throw new YamlProblem(`anchors and aliases are not allowed (found &${state.anchor})`, line);
    }
    let node: Child = { result: state.result, line, children: frame.children };
    // js-yaml may open a node, then read its content as the (rejected) key of an
    // implicit mapping: one wrapper around one child with the same value.
    for (;;) {
      const only = node.children.length === 1 ? node.children[0] : undefined;
      if (only === undefined || only.result !== node.result) break;
      node = only;
    }
    register(node, file, locator);
    const parent = stack[stack.length - 1];
    (parent ? parent.children : roots).push(node);
  };

  try {
    return yaml.load(text, {
      filename: file,
      schema: yaml.CORE_SCHEMA,
      json: false,
      listener: listener as unknown as (this: unknown, event: 'open' | 'close', state: unknown) => void,
    });
  } catch (err) {
    if (err instanceof YamlProblem) throw err;
    if (err instanceof yaml.YAMLException) {
      const line = typeof err.mark?.line === 'number' ? err.mark.line + 1 : 0;
      throw new YamlProblem(err.reason || err.message, line);
    }
    throw err;
  }
}

function register(node: Child, file: string, locator: Locator): void {
  const value = node.result;
  if (Array.isArray(value)) {
    const items = node.children.length === value.length ? node.children.map((c) => c.line) : undefined;
    locator.register(value, { file, line: node.line, ...(items ? { items } : {}) });
  } else if (isMapping(value)) {
    const count = Object.keys(value).length;
    let keys: Map<string, { line: number }> | undefined;
    if (node.children.length === 2 * count) {
      keys = new Map();
      for (let i = 0; i < node.children.length; i += 2) {
        const k = node.children[i];
        if (!k || (k.result !== null && typeof k.result === 'object')) {
          keys = undefined;
          break;
        }
        keys.set(String(k.result), { line: k.line });
      }
    }
    locator.register(value, { file, line: node.line, ...(keys ? { keys } : {}) });
  }
}
