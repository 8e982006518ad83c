/** The schema of one line of GET /v1/events: a SpcdEvent (agent/model/events.ts) or a heartbeat. */
import { anyObject, arr, bool, int, obj, oneOfStrings, ref, str, type Schema } from './schema.js';

const at = int(0, 'milliseconds since the epoch');
const type = (t: string): Schema => ({ const: t });

const UPGRADE_OUTCOMES = ['succeeded', 'rolled_back', 'refused', 'failed', 'rollback_failed'];

/** Named schemas for #/components/schemas, one per event type. */
export function eventSchemas(): Record<string, Schema> {
  const events: Record<string, Schema> = {
    ...containerEvents(),
    ...operationEvents(),
    ...upgradeEvents(),
    ...daemonEvents(),
  };
  return {
    ...events,
    EventLine: {
      description: 'One line of GET /v1/events: an event, or a heartbeat.',
      oneOf: Object.keys(events).map(ref),
    },
  };
}

/** What happens to a container: its state, its checks, its dependencies. */
function containerEvents(): Record<string, Schema> {
  return {
    StateEvent: obj({ type: type('state'), at, container: str(), from: str(), to: str(), reason: str() }, [
      'reason',
    ]),
    HealthEvent: obj(
      { type: type('health'), at, container: str(), check: str(), status: str(), output: str() },
      ['check', 'output'],
    ),
    DependencyEvent: obj(
      {
        type: type('dependency'),
        at,
        container: str(),
        check: str(),
        dependency: str(),
        status: oneOfStrings(['down', 'up']),
        output: str(),
      },
      ['output'],
      'a dependency check turned unhealthy (down) or passes again (up); the container is not restarted for it',
    ),
  };
}

/** An operation's steps and its pull's progress, and the operation itself. */
function operationEvents(): Record<string, Schema> {
  return {
    UpgradeStepEvent: obj(
      {
        type: type('upgrade-step'),
        at,
        operationId: str(),
        container: str(),
        step: str(),
        generation: int(0),
        outcome: oneOfStrings(['begin', 'done', 'failed']),
        detail: str(),
      },
      ['detail'],
    ),
    PullProgressEvent: obj(
      {
        type: type('pull-progress'),
        at,
        operationId: str(),
        image: str(),
        status: str(),
        current: { type: 'number' },
        total: { type: 'number' },
      },
      ['current', 'total'],
    ),
    OperationEvent: {
      ...obj(
        {
          type: type('operation'),
          at,
          operationId: str(),
          kind: str(),
          target: str(),
          phase: oneOfStrings(['accepted', 'running', 'succeeded', 'failed']),
          error: obj({ code: str(), message: str() }),
          result: anyObject('what the operation did; depends on its kind (a reload: ReloadResult)'),
        },
        ['error', 'result'],
      ),
      allOf: [resultOfKind('reload', 'ReloadResult')],
    },
    ReloadResult: reloadResult(),
  };
}

/** An operation of `kind` that succeeded with a result: the result is the named schema. */
function resultOfKind(kind: string, schema: string): Schema {
  return {
    if: {
      type: 'object',
      properties: { kind: { const: kind }, phase: { const: 'succeeded' } },
      required: ['kind', 'phase'],
    },
    then: { type: 'object', properties: { result: ref(schema) }, required: ['result'] },
  };
}

/** What a reload did: the definitions read, the changes they ask for, and the operations it caused. */
function reloadResult(): Schema {
  return obj(
    {
      containers: int(0, 'how many containers the definitions now in force declare'),
      changes: arr(obj({ kind: str('a step kind'), reason: str() })),
      quarantined: arr(str('a container still quarantined after its retry')),
      operations: arr(
        obj(
          {
            operationId: str('follow it on GET /v1/events by this id'),
            kind: oneOfStrings(['recover']),
            container: str(),
            outcome: oneOfStrings(['cleared', 'quarantined', 'failed', 'cancelled']),
          },
          [],
          'an operation the reload caused, as it ended: the retry of a quarantined container',
        ),
      ),
    },
    ['quarantined'],
    'The result of a reload (the operation of kind reload). The steps a pass then plans from the new definitions begin after it and are not listed.',
  );
}

/** How an upgrade ended, what refused it, and the domain census around it. */
function upgradeEvents(): Record<string, Schema> {
  return {
    UpgradeEvent: obj(
      {
        type: type('upgrade'),
        at,
        operationId: str(),
        container: str(),
        kind: oneOfStrings(['upgrade', 'recreate', 'rollback']),
        outcome: oneOfStrings(UPGRADE_OUTCOMES),
        code: str(),
      },
      ['code'],
    ),
    ImageRefusedEvent: obj({
      type: type('image-refused'),
      at,
      operationId: str(),
      image: str(),
      reason: str(),
    }),
    VmSafetyRefusedEvent: obj({
      type: type('vm-safety-refused'),
      at,
      container: str(),
      action: oneOfStrings(['upgrade', 'stop', 'remove']),
      reason: str(),
    }),
    CensusEvent: obj(
      {
        type: type('census'),
        at,
        operationId: str(),
        container: str(),
        action: str(),
        outcome: oneOfStrings(['ok', 'mismatch', 'skipped']),
        before: arr(str()),
        after: arr(str()),
        missing: arr(str()),
        added: arr(str()),
        vmProcesses: int(0),
        detail: str(),
      },
      ['before', 'after', 'vmProcesses'],
    ),
  };
}

/** The daemon's own: the engine, reloads, the heartbeat. */
function daemonEvents(): Record<string, Schema> {
  return {
    EngineEvent: obj({ type: type('engine'), at, available: bool, reason: str() }, ['reason']),
    ReloadEvent: obj({ type: type('reload'), at, ok: bool, detail: str() }, ['detail']),
    Heartbeat: obj({ type: type('heartbeat'), at }, [], 'sent every 15 s so idle clients notice a dead peer'),
  };
}
