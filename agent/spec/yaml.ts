import yaml from 'js-yaml';
import { SpcdError } from '../errors.js';
import { Locator } from './where.js';

/**
 * Parses one YAML document with the core schema (no timestamps, no merge keys,
 * no binary) and records, through js-yaml's node listener, the line of every
 * mapping key and sequence item into the Locator. Anchors are refused outright
 * (and so aliases can never resolve): expanding aliases is how a small file
 * becomes a huge value (CVE-2019-11253).
 */

/**
 * What one load (all set files, the overrides and the check library together)
 * may parse: js-yaml has no node budget, and a file under the size cap can
 * still expand to hundreds of MB of objects (nested flow sequences), so the
 * listener counts nodes and depth as they open and stops the parse at once.
 */
export interface YamlLimits {
  /** Nodes (mappings, sequences, keys, scalars) across all files of one load. */
  readonly maxNodes: number;
  /** Deepest nesting of collections in any one file. */
  readonly maxDepth: number;
  /** Bytes of YAML across all files of one load. */
  readonly maxTotalBytes: number;
}

export const DEFAULT_YAML_LIMITS: YamlLimits = {
  maxNodes: 50_000,
  maxDepth: 40,
  maxTotalBytes: 4 * 1024 * 1024,
};

/** The budget left in one load; shared by every parseYaml call of that load. */
export class YamlBudget {
  private nodes = 0;
  private bytes = 0;

  constructor(readonly limits: YamlLimits = DEFAULT_YAML_LIMITS) {}

  /** Reserves `size` bytes for a file about to be read; a reason when it would pass the total. */
  takeBytes(size: number): string | undefined {
    if (this.bytes + size > this.limits.maxTotalBytes) {
      return `would bring the definitions of this load to ${this.bytes + size} bytes, over the ${this.limits.maxTotalBytes}-byte total`;
    }
    this.bytes += size;
    return undefined;
  }

  /** Counts one node; a reason when the load has used up its node budget. */
  takeNode(): string | undefined {
    if (++this.nodes > this.limits.maxNodes) {
      return `holds more YAML nodes than the ${this.limits.maxNodes} allowed across the definitions of one load`;
    }
    return undefined;
  }
}

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

/** The parse stopped because a budget ran out (not a syntax error): reported as SPEC_TOO_LARGE. */
export class YamlBudgetExceeded extends YamlProblem {
  constructor(message: string, line = 0) {
    super(message, line);
    this.name = 'YamlBudgetExceeded';
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

export function parseYaml(
  text: string,
  file: string,
  locator: Locator,
  budget: YamlBudget = new YamlBudget(),
): unknown {
  const starts = lineStarts(text);
  const stack: Frame[] = [];
  const roots: Child[] = [];
  const maxDepth = budget.limits.maxDepth;

  const listener = (event: 'open' | 'close', state: ListenerState): void => {
    if (event === 'open') {
      const over = budget.takeNode();
      if (over !== undefined)
        throw new YamlBudgetExceeded(over, lineAt(starts, skipBlank(text, state.position)));
      if (stack.length >= maxDepth) {
        throw new YamlBudgetExceeded(
          `nests deeper than ${maxDepth} levels`,
          lineAt(starts, skipBlank(text, state.position)),
        );
      }
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

/**
 * One YAML document read outside a load of the definitions (the fleet's
 * desired document, from a ConfigMap or an etcd key), under the same rules:
 * no anchors or aliases, and a budget of bytes, nodes and depth (its own, or
 * one shared by the parts of one document). Typed errors name `source`:
 * SPEC_TOO_LARGE when the budget runs out, SPEC_YAML otherwise.
 */
export function parseBudgetedYaml(
  text: string,
  source: string,
  budget: YamlBudget = new YamlBudget(),
  details: Record<string, unknown> = {},
): unknown {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (budget.takeBytes(bytes) !== undefined) {
    throw new SpcdError(
      'SPEC_TOO_LARGE',
      `${source}: ${bytes} bytes of YAML, over the ${budget.limits.maxTotalBytes}-byte total one document may hold`,
      { ...details, source, bytes, cap: budget.limits.maxTotalBytes },
    );
  }
  try {
    return parseYaml(text, source, new Locator(), budget);
  } catch (err) {
    if (!(err instanceof YamlProblem)) throw err;
    const at = err.line > 0 ? ` line ${err.line}:` : '';
    throw new SpcdError(
      err instanceof YamlBudgetExceeded ? 'SPEC_TOO_LARGE' : 'SPEC_YAML',
      `${source}:${at} ${err.message}`,
      { ...details, source, ...(err.line > 0 ? { line: err.line } : {}) },
    );
  }
}
