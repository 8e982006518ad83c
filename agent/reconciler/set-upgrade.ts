/**
 * A set upgrade: each member the request changes, in start order, through
 * the operator's upgrade transaction, under the set's operation; the first
 * failure rolls back what the set changed, newest first. Each member's step
 * is recorded with the owner of operations (publishing nothing of its own)
 * and waited for with `done`, like any other operation.
 */
import { SpcdError } from '../errors.js';
import { specHash } from '../model/hash.js';
import { compareSpecHash } from '../model/hash-schemes.js';
import type { OperationRef } from '../model/operation.js';
import { allContainers, findSet, type ContainerSpec, type DesiredState } from '../model/spec.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { assertImageAllowed, type PullPolicy } from '../executor/image.js';
import type { DesiredContainer, Intent, StepOperation } from '../planner/types.js';
import type { Operations } from './operations.js';
import type { Reconciler } from './reconciler.js';

export interface SetUpgradeDeps {
  readonly reconciler: Reconciler;
  readonly operations: Operations;
  readonly exec: Pick<ExecutorDeps, 'state' | 'imagePolicy'>;
  /** The definitions on disk (not pinned), for pins and set membership. */
  readonly definitions: () => DesiredState;
}

export interface ChangeOptions {
  readonly pull?: PullPolicy;
  readonly expectDigest?: string;
  readonly force?: boolean;
  readonly from?: number;
}

/** The intent to run the transaction to `spec`; on success it is pinned so the definitions do not undo it. */
export function changeIntent(
  definitions: DesiredState,
  operation: StepOperation,
  change: 'upgrade' | 'rollback',
  spec: ContainerSpec,
  opts: ChangeOptions,
): Intent {
  const definition = allContainers(definitions.sets).find((c) => c.name === spec.name);
  if (!definition)
    throw new SpcdError('NOT_FOUND', `no container named ${spec.name}`, { container: spec.name });
  return {
    verb: 'change',
    operation,
    change,
    spec,
    definitionHash: specHash(definition),
    pull: opts.pull ?? 'missing',
    ...(opts.expectDigest ? { expectDigest: opts.expectDigest } : {}),
    force: opts.force === true,
    ...(opts.from !== undefined ? { from: opts.from } : {}),
  };
}

/** Checks the request and begins the set's operation; NOT_FOUND or UNPROCESSABLE at once. */
export function upgradeSet(
  d: SetUpgradeDeps,
  path: string,
  opts: { images?: Readonly<Record<string, string>> },
): OperationRef {
  const set = findSet(d.definitions().sets, path);
  if (!set) throw new SpcdError('NOT_FOUND', `no set ${path}`, { set: path });
  const members = new Set(allContainers([set]).map((c) => c.name));
  for (const [name, image] of Object.entries(opts.images ?? {})) {
    if (!members.has(name))
      throw new SpcdError('UNPROCESSABLE', `${name} is not in set ${path}`, { set: path, container: name });
    assertImageAllowed(d.exec.imagePolicy, image, { container: name });
  }
  const ordered = d.reconciler.desiredContainers().filter((c) => members.has(c.spec.name));
  const operation: StepOperation = { id: d.operations.newId('set-upgrade'), kind: 'set-upgrade' };
  return d.operations.track(
    operation.id,
    'set-upgrade',
    path,
    runSet(d, operation, path, ordered, opts.images),
  );
}

async function runSet(
  d: SetUpgradeDeps,
  operation: StepOperation,
  path: string,
  ordered: readonly DesiredContainer[],
  images: Readonly<Record<string, string>> = {},
): Promise<Record<string, unknown>> {
  const upgraded: { name: string; previous: ContainerSpec }[] = [];
  const changed: Record<string, number> = {};
  for (const c of ordered) {
    const name = c.spec.name;
    const image = images[name];
    const target: ContainerSpec = image ? { ...c.spec, image } : c.spec;
    const current = d.reconciler.primary(name);
    if (current && compareSpecHash(current.identity.specHash, target).kind === 'same' && !image) continue;
    if (current && image && current.image === image) continue;
    const previous = current ? d.exec.state.generation(name, current.identity.generation)?.spec : undefined;
    try {
      changed[name] = await member(d, operation, 'upgrade', target);
      if (previous) upgraded.push({ name, previous });
    } catch (err) {
      // Stop at the first failure and roll back what the set changed, newest first.
      for (const prev of upgraded.reverse()) {
        await member(d, operation, 'rollback', prev.previous).catch(() => undefined);
      }
      throw new SpcdError(
        'UPGRADE_FAILED',
        `set ${path}: upgrade of ${name} failed; rolled back ${upgraded.map((x) => x.name).join(', ') || 'nothing else'}: ${(err as Error).message}`,
        { set: path, failed: name, rolledBack: upgraded.map((x) => x.name) },
      );
    }
  }
  return { set: path, generations: changed };
}

/**
 * One member's step (or its undoing) under the set's operation (what locks
 * the container and what the status shows); recorded under its own id,
 * `<set operation>/<change>/<container>`, and waited for with `done`.
 */
async function member(
  d: SetUpgradeDeps,
  operation: StepOperation,
  change: 'upgrade' | 'rollback',
  spec: ContainerSpec,
): Promise<number> {
  const id = `${operation.id}/${change}/${spec.name}`;
  const intent = changeIntent(d.definitions(), operation, change, spec, {});
  d.operations.follow(
    { operationId: id, kind: change, target: spec.name },
    d.reconciler.request(spec.name, intent),
  );
  const outcome = await d.operations.done(id);
  if (outcome.phase !== 'succeeded') throw outcome.error;
  const generation = outcome.result?.['generation'];
  return typeof generation === 'number' ? generation : 0;
}
