/**
 * The desired document in etcd: one key (`<prefix>desired`) holding a YAML
 * (or JSON) map with the ConfigMap's three parts, so that an operator changes
 * the target, its globals and its rollout object in one atomic put:
 *
 *   images:  { nova_compute: registry/nova-compute:2024.2-3 }
 *   globals: { openstack_release: 2024.2 }
 *   rollout: { maxConcurrent: 10, canary: { nodes: 2, soak: 10m } }
 *
 * Each part is checked by the same rules as the ConfigMap's key of that name
 * (agent/kube/desired-watcher.ts). Pure.
 */
import yaml from 'js-yaml';
import { SpcdError } from '../errors.js';
import { parseDesired } from '../kube/desired-watcher.js';
import { parseBudgetedYaml, YamlBudget } from '../spec/yaml.js';
import type { DesiredDocument } from '../rollout/backend.js';

const PARTS = ['images', 'globals', 'rollout'] as const;

function invalid(key: string, message: string, details: Record<string, unknown> = {}): SpcdError {
  return new SpcdError('SPEC_INVALID', `etcd key ${key}: ${message}`, { key, ...details });
}

/** The desired key's `rollout` part as the rollout object's errors name it. */
export function etcdSource(key: string): string {
  return `etcd key ${key}, field rollout`;
}

/** Parses the desired key's value; throws SPEC_INVALID / SPEC_YAML naming the key (and the part). */
export function parseEtcdDesired(text: string, key: string, version: string): DesiredDocument {
  // The budget of one load of the definitions (bytes, nodes, depth; no aliases): a fleet writer cannot
  // make every node parse a document without end.
  let doc: unknown =
    text.trim() === '' ? {} : parseBudgetedYaml(text, `etcd key ${key}`, new YamlBudget(), { key });
  if (doc === null || doc === undefined) doc = {};
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw invalid(key, 'must be a map with images, globals and rollout');
  const map = doc as Record<string, unknown>;
  for (const k of Object.keys(map))
    if (!(PARTS as readonly string[]).includes(k))
      throw invalid(key, `${k} is not a part (known: ${PARTS.join(', ')})`, { part: k });
  // The ConfigMap's parser, one part per key: the same checks and messages.
  const data: Record<string, string> = {};
  for (const k of PARTS) if (map[k] !== undefined && map[k] !== null) data[k] = yaml.dump(map[k]);
  try {
    const d = parseDesired({ metadata: { name: key, resourceVersion: version }, data });
    return { version, images: d.images, globals: d.globals, rollout: d.rollout, source: etcdSource(key) };
  } catch (err) {
    throw asEtcdKeyError(err, key);
  }
}

/**
 * An error of the ConfigMap's parsers (`ConfigMap key "rollout": …`) as one
 * of the etcd key (`etcd key /spcd/desired: rollout: …`, details.part the
 * part); anything else is returned as it is.
 */
export function asEtcdKeyError(err: unknown, key: string): unknown {
  if (!(err instanceof SpcdError)) return err;
  return new SpcdError(
    err.code,
    `etcd key ${key}: ${err.message.replace(/^ConfigMap (\S+ )?key "([a-z]+)"/, '$2')}`,
    { ...err.details, key, part: err.details.key },
    { cause: err },
  );
}
