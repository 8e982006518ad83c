/**
 * Adoption: the running containers without spcd labels as container-set
 * entries (the scan), the operator's word that adopts one, and the release
 * that gives one back. Each answers 404 when the daemon has no such verb.
 */
import { SpcdError } from '../../errors.js';
import { readJsonBody } from '../body.js';
import { json, type Route, type RouteContext } from '../context.js';
import { checkBody } from '../openapi/check.js';
import { anyObject, arr, obj, ref, str } from '../openapi/schema.js';
import type { RouteDoc } from '../openapi/document.js';
import type { Actions, OperationRef } from '../types.js';
import { CONTAINER_PARAM } from './reads.js';

const EMPTY = obj({}, []);

function unsupported(what: string): SpcdError {
  return new SpcdError('NOT_FOUND', `this daemon does not ${what}`);
}

async function emptyBody(ctx: RouteContext): Promise<void> {
  checkBody(EMPTY, await readJsonBody(ctx.req, ctx.limits));
}

export const adoptScan: Route = {
  doc: {
    summary: 'Every running container without spcd labels, as a container-set entry that reproduces it',
    responses: [
      {
        status: 200,
        description: 'the containers, by name',
        schema: obj({
          containers: arr(obj({ name: str(), definition: anyObject('YAML keys of a container') })),
        }),
      },
    ],
    errors: ['ENGINE_UNAVAILABLE', 'NOT_FOUND'],
  },
  handler: async (ctx) => {
    const scan = ctx.deps.actions.adoptScan;
    if (!scan) throw unsupported('scan for containers to adopt');
    return json(200, await scan.call(ctx.deps.actions));
  },
};

/** A verb on one container that answers with its operation (202), or 404 when this daemon has none. */
function containerVerb(
  summary: string,
  errors: RouteDoc['errors'],
  verb: (actions: Actions) => ((name: string) => Promise<OperationRef>) | undefined,
): Route {
  return {
    doc: {
      summary,
      params: CONTAINER_PARAM,
      body: EMPTY,
      responses: [
        { status: 202, description: 'accepted; follow it on GET /v1/events', schema: ref('OperationRef') },
      ],
      errors,
    },
    handler: async (ctx) => {
      const name = ctx.params.name ?? '';
      ctx.audit.target = name;
      await emptyBody(ctx);
      const run = verb(ctx.deps.actions);
      if (!run) throw unsupported(`${summary.split(' ')[0]?.toLowerCase() ?? ''} containers`);
      const answer = await run.call(ctx.deps.actions, name);
      ctx.audit.operationId = answer.operationId;
      return json(202, answer);
    },
  };
}

export const adoptContainer = containerVerb(
  'Adopt the container without spcd labels running under this name: recorded, never stopped or restarted',
  ['CONFLICT', 'SHUTTING_DOWN', 'RECOVERY_QUARANTINED', 'ENGINE_UNAVAILABLE', 'NOT_FOUND', 'ADOPT_BLOCKED'],
  (a) => a.adopt,
);

export const releaseContainer = containerVerb(
  'Release an adopted container: it runs on as it is, no longer managed',
  ['CONFLICT', 'SHUTTING_DOWN', 'NOT_FOUND'],
  (a) => a.release,
);
