import { SpcdError } from '../errors.js';
import type { ContainerRecord } from './store.js';

export interface StateFile {
  readonly version: 1;
  readonly containers: Readonly<Record<string, ContainerRecord>>;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1;

/**
 * Checks the shape spcd relies on (not every field of every spec): a file
 * that parses as JSON but is not a state file is as unusable as a torn one.
 * The error names the file and the field.
 */
export function parseStateFile(raw: unknown, path: string): StateFile {
  const bad = (field: string, what: string): SpcdError =>
    new SpcdError('STATE_CORRUPT', `${path}: ${field} ${what}`, { path, field });
  if (!isObject(raw)) throw bad('(top level)', 'is not an object');
  if (raw.version !== 1) throw bad('version', 'is not 1 (unknown state format)');
  if (!isObject(raw.containers)) throw bad('containers', 'is not an object');
  for (const [name, r] of Object.entries(raw.containers)) {
    const at = `containers.${name}`;
    if (!isObject(r)) throw bad(at, 'is not an object');
    if (!isCount(r.nextGeneration)) throw bad(`${at}.nextGeneration`, 'is not a positive integer');
    if (r.lastKnownGood !== null && !isCount(r.lastKnownGood))
      throw bad(`${at}.lastKnownGood`, 'is neither null nor a positive integer');
    if (typeof r.heldStopped !== 'boolean') throw bad(`${at}.heldStopped`, 'is not a boolean');
    if (!Array.isArray(r.generations)) throw bad(`${at}.generations`, 'is not a list');
    const a = r.adopted;
    if (a !== undefined && (!isObject(a) || typeof a.id !== 'string' || !isCount(a.generation)))
      throw bad(`${at}.adopted`, 'lacks id or generation');
    r.generations.forEach((g: unknown, i) => {
      if (!isObject(g) || !isCount(g.generation) || typeof g.outcome !== 'string' || !isObject(g.spec))
        throw bad(`${at}.generations[${i}]`, 'lacks generation, outcome or spec');
    });
  }
  return raw as unknown as StateFile;
}
