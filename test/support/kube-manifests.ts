/** deploy/kubernetes/ as shipped: every YAML document of every file, in file order. */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';

const DIR = join(import.meta.dirname, '../../deploy/kubernetes');
const texts = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => readFileSync(join(DIR, f), 'utf8'));

/** Each document as plain data (js-yaml). */
export const rawManifests = (): Record<string, unknown>[] =>
  texts.flatMap((t) => yaml.loadAll(t) as Record<string, unknown>[]);

/** Each document as its client-node type. */
export const typedManifests = (): KubernetesObject[] =>
  texts.flatMap((t) => loadAllYaml(t) as KubernetesObject[]);

/** The documents of one kind, typed. */
export const manifestsOfKind = <T>(kind: string): T[] =>
  typedManifests().filter((o) => o.kind === kind) as T[];
