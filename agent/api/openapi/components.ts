/**
 * The schemas of what the API answers, named as in agent/api/types.ts (each
 * one mirrors the interface of the same name) and the error shape whose
 * `code` is the catalogue of agent/errors.ts. Answers recorded in the tests
 * are validated against these (test/support/api-contract.ts).
 */
import { ERRORS } from '../../errors.js';
import { CONTAINER_STATES, HEALTH_STATES } from '../metrics.js';
import { eventSchemas } from './events.js';
import {
  anyObject,
  arr,
  bool,
  int,
  isoTime,
  nullable,
  obj,
  oneOfStrings,
  ref,
  str,
  type Schema,
} from './schema.js';

const ErrorView = obj({ code: str(), message: str(), at: isoTime });

const CensusView = obj(
  {
    outcome: oneOfStrings(['ok', 'mismatch', 'skipped']),
    action: str('upgrade, recreate, rollback or restart'),
    operationId: str(),
    at: isoTime,
    before: nullable(int(0)),
    after: nullable(int(0)),
    missing: arr(str()),
    added: arr(str()),
    vmProcesses: nullable(int(0)),
    detail: str(),
    mismatches: int(0, 'mismatches since spcd started'),
  },
  [],
  'The last domain census of a hypervisor container (docs/explanation/vm-survival.md).',
);

const ContainerStatus = obj(
  {
    name: str(),
    set: str('the path of its set'),
    generation: int(0, '0 when never created'),
    image: str(),
    imageDigest: nullable(str()),
    containerId: nullable(str()),
    state: oneOfStrings(CONTAINER_STATES),
    health: ref('HealthState'),
    dependencies: arr(ref('DependencyView')),
    dockerHealth: nullable(str("the image's own HEALTHCHECK status")),
    restartCount: int(0),
    startedAt: nullable(isoTime),
    lastError: nullable(ref('ErrorView')),
    specHash: str(),
    configHash: str(),
    operation: nullable(str('id of the operation that has it locked')),
    untouched: str('why spcd leaves it as it is (labels written by a newer spcd)'),
    census: ref('CensusView'),
  },
  ['untouched', 'census', 'dependencies'],
);

const DependencyView = obj(
  { check: str(), dependency: str(), status: oneOfStrings(['up', 'down', 'unknown']) },
  [],
  "a dependency check's view of a service outside the container (docs/reference/health-checks.md)",
);

const SetStatus = obj({
  name: str(),
  path: str('slash path, e.g. compute/neutron'),
  description: str(),
  containers: arr(ref('ContainerStatus')),
  sets: arr(ref('SetStatus')),
});

const DefinitionProblem = obj({ file: str(), line: int(0), path: str(), message: str() });

const DefinitionsStatus: Schema = {
  description: 'Whether the definitions on disk are in force (docs/how-to/operate-a-host.md).',
  oneOf: [
    obj({ loaded: { const: true } }),
    obj({
      loaded: { const: false },
      holding: { const: true },
      error: obj({ code: str(), message: str(), problems: arr(ref('DefinitionProblem')) }, ['problems']),
    }),
  ],
};

const StateRecoveryView = obj(
  {
    at: isoTime,
    reason: str(),
    movedTo: nullable(str()),
    rebuilt: arr(str()),
    rebuildError: str(),
  },
  ['rebuildError'],
);

const StatusDocument = obj(
  {
    version: str(),
    build: obj({ commit: str(), date: str() }),
    instance: str(),
    host: anyObject('host facts'),
    engine: obj({ available: bool, version: str(), reason: str() }, ['version', 'reason']),
    preflight: anyObject('the preflight report'),
    definitions: ref('DefinitionsStatus'),
    sets: arr(ref('SetStatus')),
    retained: arr(ref('ContainerStatus')),
    stateRecovery: ref('StateRecoveryView'),
  },
  ['build', 'preflight', 'definitions', 'retained', 'stateRecovery'],
);

const HealthResultView = obj({
  at: isoTime,
  ok: bool,
  exitCode: nullable(int()),
  timedOut: bool,
  durationMs: { type: 'number', minimum: 0 },
  output: str(),
});

const CheckHealthView = obj(
  {
    name: str(),
    status: ref('HealthState'),
    dependency: str('set for a dependency check'),
    consecutiveFailures: int(0),
    consecutiveSuccesses: int(0),
    history: arr(ref('HealthResultView')),
  },
  ['dependency'],
);

const ContainerHealthView = obj({
  name: str(),
  status: ref('HealthState'),
  dockerHealth: nullable(str()),
  checks: arr(ref('CheckHealthView')),
});

const GenerationView = obj(
  {
    generation: int(0),
    image: str(),
    imageDigest: nullable(str()),
    specHash: str(),
    configHash: str(),
    createdAt: isoTime,
    outcome: oneOfStrings(['current', 'committed', 'rolled-back', 'failed', 'superseded', 'in-progress']),
    reason: str(),
    from: int(0, 'the generation whose spec this one re-applied (rollbacks)'),
  },
  ['reason', 'from'],
);

const ConfigFileChangeView = obj(
  {
    path: str("relative to the container's config directory"),
    change: oneOfStrings(['added', 'removed', 'modified']),
    fromSha256: nullable(str()),
    toSha256: nullable(str()),
    diff: str('unified diff, secrets masked, when spcd still keeps both versions'),
  },
  ['diff'],
);

const GenerationDiffView = obj(
  {
    name: str(),
    from: ref('GenerationView'),
    to: ref('GenerationView'),
    image: obj({ from: str(), to: str() }),
    imageDigest: obj({ from: nullable(str()), to: nullable(str()) }),
    spec: arr(obj({ path: str(), from: {}, to: {} }, ['from', 'to'])),
    config: obj({ changed: bool, filesKnown: bool, files: arr(ConfigFileChangeView) }),
  },
  ['image', 'imageDigest'],
);

const PlanItem = obj(
  {
    container: str(),
    set: str(),
    action: oneOfStrings(['create', 'recreate', 'restart', 'remove', 'start', 'adopt', 'none']),
    reason: str(),
    fileDiffs: arr(obj({ file: str(), diff: str() })),
  },
  ['fileDiffs'],
);

const PlanView = obj({ items: arr(ref('PlanItem')), problems: arr(str()) });

const OperationRef = obj(
  { operationId: str(), kind: str(), target: str(), acceptedAt: isoTime },
  [],
  'A long operation was accepted; follow it on GET /v1/events by operationId.',
);

/** Every code of the catalogue (agent/errors.ts), in its order. */
export const ERROR_CODES: readonly string[] = Object.keys(ERRORS);

const ErrorAnswer = obj(
  {
    code: {
      ...oneOfStrings(ERROR_CODES),
      description: 'a code of the error catalogue (docs/reference/errors.md)',
    },
    message: str(),
    details: anyObject('what the error is about: field, container, limit...'),
  },
  [],
  "Every error answers this shape; its status is the code's in the catalogue.",
);

/** #/components/schemas: every named schema the document refers to. */
export function componentSchemas(): Record<string, Schema> {
  return {
    HealthState: oneOfStrings(HEALTH_STATES),
    ErrorView,
    CensusView,
    ContainerStatus,
    DependencyView,
    SetStatus,
    DefinitionProblem,
    DefinitionsStatus,
    StateRecoveryView,
    StatusDocument,
    HealthResultView,
    CheckHealthView,
    ContainerHealthView,
    GenerationView,
    GenerationDiffView,
    PlanItem,
    PlanView,
    OperationRef,
    Error: ErrorAnswer,
    ...eventSchemas(),
  };
}
