import type { CheckSpec } from '../model/spec.js';
import {
  ACTIONS,
  CHECK_KEYS,
  CHECK_NAME,
  DEPENDENCY_NAME,
  PROBE_KEYS,
  PROCESS_COMM,
  PROCESS_NAME,
  SCHEDULE_KEYS,
  TCP_TARGET,
  validateCheck,
  type CheckLibrary,
} from './check.js';
import {
  DURATION_SCHEMA,
  ints,
  nonEmptyStrings,
  object,
  SIZE_SCHEMA,
  str,
  STRINGS_SCHEMA,
  type JsonSchema,
} from './fields.js';
import type { Reader } from './read.js';
import type { Where } from './where.js';

/** A container's `healthchecks:` list (each entry by check.ts), and the JSON Schema of one entry. */

export function readChecks(
  r: Reader,
  v: unknown,
  w: Where,
  library: CheckLibrary | undefined,
): CheckSpec[] | undefined {
  const cr = r.withCode('CHECK_INVALID');
  const items = cr.list(v, w);
  if (!items) return undefined;
  const out: CheckSpec[] = [];
  const names = new Map<string, string>();
  let ok = true;
  items.forEach((item, i) => {
    const iw = cr.child(items, i, w);
    const check = validateCheck(cr, item, iw, library);
    if (!check) {
      ok = false;
      return;
    }
    const first = names.get(check.name);
    if (first !== undefined) {
      cr.fail(iw, `check name "${check.name}" is already used by ${first}`);
      ok = false;
      return;
    }
    names.set(check.name, iw.path);
    out.push(check);
  });
  return ok ? out : undefined;
}

/** One `healthchecks:` entry: a probe of its own, or `use:` of a library check (whose probe it may replace). */
export function checkSchema(): JsonSchema {
  const props: Record<(typeof CHECK_KEYS)[number], JsonSchema> = {
    name: str(CHECK_NAME),
    exec: nonEmptyStrings,
    shell: { type: 'string', minLength: 1 },
    tcp: str(TCP_TARGET),
    http: { type: 'string', pattern: '^https?://' },
    process: str(PROCESS_COMM),
    established: object(
      { process: str(PROCESS_NAME), ports: { ...ints(1, 65535), minItems: 1 } },
      ['process', 'ports'],
      ['process', 'ports'],
    ),
    expect_status: ints(100, 599),
    interval: DURATION_SCHEMA,
    cron: { type: 'string', minLength: 1 },
    timeout: DURATION_SCHEMA,
    start_period: DURATION_SCHEMA,
    start_interval: DURATION_SCHEMA,
    failure_threshold: { type: 'integer', minimum: 1, maximum: 1000 },
    success_threshold: { type: 'integer', minimum: 1, maximum: 1000 },
    action: { enum: [...ACTIONS] },
    max_output: SIZE_SCHEMA,
    dependency: str(DEPENDENCY_NAME),
    use: { type: 'string', minLength: 1 },
    args: STRINGS_SCHEMA,
  };
  return {
    ...object(props, CHECK_KEYS),
    if: { not: { required: ['use'] } },
    then: { required: ['name'], oneOf: PROBE_KEYS.map((k) => ({ required: [k] })) },
    else: {
      not: {
        anyOf: PROBE_KEYS.flatMap((a, i) => PROBE_KEYS.slice(i + 1).map((b) => ({ required: [a, b] }))),
      },
    },
    not: { required: [...SCHEDULE_KEYS] },
    dependentRequired: { args: ['use'] },
    dependentSchemas: {
      expect_status: { anyOf: [{ required: ['http'] }, { required: ['use'] }] },
      // A dependency check never restarts or stops its container (docs/reference/health-checks.md).
      dependency: { properties: { action: { const: 'none' } } },
    },
  };
}
