import { FIELD_ROWS } from '../model/container-fields.js';
import { checkSchema } from './check-schema.js';
import { CONTAINER_NAME, CUSTOM_READERS } from './custom-readers.js';
import { object, plainSchema, type JsonSchema } from './fields.js';
import { MERGED_FIELDS, OVERRIDE_KEYS } from './overrides.js';
import { ROOT_KEYS, SET_NAME, SUBSET_KEYS } from './set.js';

/**
 * The JSON Schema (2020-12) of container-set files, for editors
 * (yaml-language-server) and tests: built from the field table and the key
 * lists and patterns the validator itself uses, never written by hand.
 * container-sets/container-set.schema.json is its output (`npm run schema`);
 * a test fails when the committed file differs. What a schema cannot say
 * (cross-field rules, depends_on naming a sibling, units with bounds) only
 * the validator checks.
 */

export const SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** One container mapping: the table's rows, each with its one-line doc and default. */
function containerSchema(): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [, def] of FIELD_ROWS) {
    const value =
      def.value.kind === 'custom' ? CUSTOM_READERS[def.value.reader].schema() : plainSchema(def.value);
    properties[def.key] = {
      description: def.doc,
      ...value,
      ...(def.default !== undefined ? { default: def.default } : {}),
    };
    if (def.required) required.push(def.key);
  }
  return object(properties, Object.keys(properties), required);
}

const DESCRIPTION: JsonSchema = { type: 'string', description: 'What the set is for.' };
const DEFAULTS: JsonSchema = {
  type: 'object',
  description: 'Template defaults for config rendering (lowest precedence).',
};

function setBody(keys: readonly string[], extra: Record<string, JsonSchema> = {}): JsonSchema {
  return object(
    {
      ...extra,
      description: DESCRIPTION,
      defaults: DEFAULTS,
      containers: {
        type: 'object',
        description: 'Containers by name (the docker container name, unique on the host).',
        propertyNames: { pattern: CONTAINER_NAME.source },
        additionalProperties: { $ref: '#/$defs/container' },
      },
      sets: {
        type: 'object',
        description: 'Nested sets by name.',
        propertyNames: { pattern: SET_NAME.source },
        additionalProperties: { $ref: '#/$defs/subset' },
      },
    },
    keys,
  );
}

/** The schema of one set file (the document root is a set). */
export function containerSetSchema(): JsonSchema {
  const root = setBody(ROOT_KEYS, {
    set: { type: 'string', description: 'The set name, unique across files.', pattern: SET_NAME.source },
  });
  return {
    $schema: SCHEMA_DIALECT,
    title: 'spcd container set',
    description: 'One file of container-sets/ (docs/reference/container-sets.md).',
    ...root,
    required: ['set'],
    $defs: { subset: setBody(SUBSET_KEYS), container: containerSchema(), check: checkSchema() },
  };
}

/**
 * The schema of a per-host override file: container fields as in a set file,
 * none required, and null deleting a field (docs/reference/container-sets.md#per-host-overrides-etcspcdoverridesyaml).
 */
export function overridesSchema(): JsonSchema {
  const container = containerSchema();
  const fields = container.properties as Record<string, JsonSchema>;
  const nullable = Object.fromEntries(
    Object.entries(fields).map(([k, v]) => {
      // merged fields are merged key by key, and a null value deletes that key
      const inner = MERGED_FIELDS.includes(k)
        ? { ...v, additionalProperties: { anyOf: [v.additionalProperties, { type: 'null' }] } }
        : v;
      return [k, { anyOf: [inner, { type: 'null' }] }];
    }),
  );
  return {
    $schema: SCHEMA_DIALECT,
    title: 'spcd per-host overrides',
    description: 'The --overrides file: container fields merged over the sets, and template values.',
    ...object(
      {
        containers: {
          type: 'object',
          propertyNames: { pattern: CONTAINER_NAME.source },
          additionalProperties: { type: 'object', additionalProperties: false, properties: nullable },
        },
        values: { type: 'object', description: 'Template values (highest precedence).' },
      },
      OVERRIDE_KEYS,
    ),
    $defs: { check: checkSchema() },
  };
}

/** The text of a schema file. */
export function schemaText(schema: JsonSchema): string {
  return `${JSON.stringify(schema, null, 2)}\n`;
}
