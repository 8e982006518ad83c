import type { ErrorCode } from '../errors.js';
import { escapeControl } from '../model/text.js';
import type { Where } from './where.js';

/** One thing wrong with the definitions, precise enough to fix without searching. */
export interface SpecProblem {
  readonly file: string;
  /** 1-based; 0 when the problem has no line (a missing file, a directory error). */
  readonly line: number;
  /** Dotted field path inside the file, e.g. `containers.nova_libvirt.binds[2]`; "" for the whole file. */
  readonly path: string;
  readonly message: string;
  readonly code: ErrorCode;
}

/**
 * "container-sets/compute.yaml:12: containers.nova_libvirt.pid: must be one of host, private".
 * One line always: file names, keys and values are the user's text, so their control characters are escaped.
 */
export function formatProblem(p: SpecProblem): string {
  const at = p.line > 0 ? `${p.file}:${p.line}` : p.file;
  return escapeControl(p.path ? `${at}: ${p.path}: ${p.message}` : `${at}: ${p.message}`);
}

/** Collects problems; validation goes on after a problem so one run reports them all. */
export class Problems {
  readonly list: SpecProblem[] = [];

  add(where: Where, message: string, code: ErrorCode): void {
    this.list.push({ file: where.file, line: where.line, path: where.path, message, code });
  }

  get count(): number {
    return this.list.length;
  }
}
