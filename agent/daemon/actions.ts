import { SpcdError } from '../errors.js';
import { specHash } from '../model/hash.js';
import { compareSpecHash } from '../model/hash-schemes.js';
import { allContainers, findSet, type ContainerSpec, type DesiredState } from '../model/spec.js';
import type { Actions, AdoptScan, OperationRef } from '../api/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { assertImageAllowed, type PullPolicy } from '../executor/image.js';
import type { Intent, StepOperation } from '../planner/types.js';
import type { Reconciler } from '../reconciler/reconciler.js';
import type { Operations } from '../reconciler/operations.js';

export interface ActionDeps {
  readonly reconciler: Reconciler;
  readonly exec: ExecutorDeps;
  readonly operations: Operations;
  /** The definitions on disk (not pinned), for pins and set membership. */
  readonly definitions: () => DesiredState;
  readonly reload: () => Promise<Record<string, unknown>>;
}

/**
 * The operator's verbs. Each checks its request, writes its intent (CONFLICT
 * at once when the container is held or has one), asks for a pass and
 * answers with the operation that the pass carries out.
 */
export class DaemonActions implements Actions {
  constructor(private readonly d: ActionDeps) {}

  private desiredSpec(name: string): ContainerSpec {
    const found = this.d.reconciler.desiredContainers().find((c) => c.spec.name === name);
    if (!found) throw new SpcdError('NOT_FOUND', `no container named ${name}`, { container: name });
    return found.spec;
  }

  /** A new generation while the definitions cannot be read could not be reconciled with them: refused. */
  private assertDefinitionsLoaded(verb: string): void {
    const why = this.d.reconciler.holding();
    if (why === null) return;
    throw new SpcdError(
      'DEFINITIONS_NOT_LOADED',
      `cannot ${verb} while the definitions cannot be read (${why}); fix them and reload first`,
      { reason: why },
    );
  }

  private definitionOf(name: string): ContainerSpec {
    const spec = allContainers(this.d.definitions().sets).find((c) => c.name === name);
    if (!spec) throw new SpcdError('NOT_FOUND', `no container named ${name}`, { container: name });
    return spec;
  }

  private checkGeneration(name: string, expected: number | undefined): void {
    if (expected === undefined) return;
    const current = this.d.reconciler.primary(name)?.identity.generation ?? 0;
    if (current !== expected) {
      throw new SpcdError('GENERATION_MISMATCH', `${name} is at generation ${current}, not ${expected}`, {
        container: name,
        expected,
        current,
      });
    }
  }

  /** Writes the intent for `verb` and answers with the operation a pass will carry out. */
  private begin(verb: 'restart' | 'stop' | 'start', name: string): OperationRef {
    const operation: StepOperation = { id: this.d.operations.newId(verb), kind: verb };
    return this.track(name, { verb, operation });
  }

  private track(name: string, intent: Intent): OperationRef {
    const { id, kind } = intent.operation;
    return this.d.operations.track(id, kind, name, this.d.reconciler.request(name, intent));
  }

  async restart(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('restart', name);
  }

  async stop(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('stop', name);
  }

  async start(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('start', name);
  }

  async upgrade(
    name: string,
    opts: {
      image: string;
      expectedGeneration?: number;
      pull?: PullPolicy;
      expectDigest?: string;
      force?: boolean;
    },
  ): Promise<OperationRef> {
    this.assertDefinitionsLoaded('upgrade');
    const base = this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    // early, for a clear answer; the executor checks again before it pulls (image.ts)
    assertImageAllowed(this.d.exec.imagePolicy, opts.image, { container: name });
    const spec: ContainerSpec = { ...base, image: opts.image };
    const operation: StepOperation = { id: this.d.operations.newId('upgrade'), kind: 'upgrade' };
    return this.track(name, this.change(operation, 'upgrade', spec, opts));
  }

  async rollback(name: string, opts: { toGeneration?: number; force?: boolean }): Promise<OperationRef> {
    this.assertDefinitionsLoaded('roll back');
    this.desiredSpec(name);
    const target = this.rollbackTarget(name, opts.toGeneration);
    const operation: StepOperation = { id: this.d.operations.newId('rollback'), kind: 'rollback' };
    const intent = this.change(operation, 'rollback', target.spec, {
      force: opts.force === true,
      from: target.generation,
    });
    return this.track(name, intent);
  }

  private rollbackTarget(name: string, to: number | undefined): { spec: ContainerSpec; generation: number } {
    const rec = this.d.exec.state.record(name);
    const current = this.d.reconciler.primary(name)?.identity.generation ?? 0;
    if (to !== undefined) {
      const g = rec?.generations.find((x) => x.generation === to);
      if (!g)
        throw new SpcdError('NOT_FOUND', `${name} has no retained generation ${to}`, {
          container: name,
          generation: to,
        });
      if (to === current)
        throw new SpcdError('UNPROCESSABLE', `${name} already runs generation ${to}`, { container: name });
      return { spec: g.spec, generation: g.generation };
    }
    const good = (rec?.generations ?? [])
      .filter(
        (g) =>
          g.generation < current &&
          (g.outcome === 'superseded' || g.outcome === 'committed' || g.outcome === 'current'),
      )
      .sort((a, b) => b.generation - a.generation)[0];
    if (!good) {
      throw new SpcdError('NOT_FOUND', `${name} has no earlier known-good generation to roll back to`, {
        container: name,
      });
    }
    return { spec: good.spec, generation: good.generation };
  }

  /** The intent to run the transaction to `spec`; on success it is pinned so the definitions do not undo it. */
  private change(
    operation: StepOperation,
    change: 'upgrade' | 'rollback',
    spec: ContainerSpec,
    opts: { pull?: PullPolicy; expectDigest?: string; force?: boolean; from?: number },
  ): Intent {
    return {
      verb: 'change',
      operation,
      change,
      spec,
      definitionHash: specHash(this.definitionOf(spec.name)),
      pull: opts.pull ?? 'missing',
      ...(opts.expectDigest ? { expectDigest: opts.expectDigest } : {}),
      force: opts.force === true,
      ...(opts.from !== undefined ? { from: opts.from } : {}),
    };
  }

  /** One member of a set upgrade (or its undoing), under the set's operation. */
  private async member(
    operation: StepOperation,
    change: 'upgrade' | 'rollback',
    spec: ContainerSpec,
  ): Promise<number> {
    const r = await this.d.reconciler.request(spec.name, this.change(operation, change, spec, {}));
    return typeof r?.['generation'] === 'number' ? r['generation'] : 0;
  }

  async upgradeSet(path: string, opts: { images?: Readonly<Record<string, string>> }): Promise<OperationRef> {
    const set = findSet(this.d.definitions().sets, path);
    if (!set) throw new SpcdError('NOT_FOUND', `no set ${path}`, { set: path });
    const members = new Set(allContainers([set]).map((c) => c.name));
    for (const name of Object.keys(opts.images ?? {})) {
      if (!members.has(name))
        throw new SpcdError('UNPROCESSABLE', `${name} is not in set ${path}`, { set: path, container: name });
      assertImageAllowed(this.d.exec.imagePolicy, opts.images![name]!, { container: name });
    }
    const ordered = this.d.reconciler.desiredContainers().filter((c) => members.has(c.spec.name));
    const id = this.d.operations.newId('set-upgrade');
    const operation: StepOperation = { id, kind: 'set-upgrade' };
    const run = (async (): Promise<Record<string, unknown>> => {
      const done: { name: string; previous: ContainerSpec }[] = [];
      const changed: Record<string, number> = {};
      for (const c of ordered) {
        const name = c.spec.name;
        const image = opts.images?.[name];
        const target: ContainerSpec = image ? { ...c.spec, image } : c.spec;
        const current = this.d.reconciler.primary(name);
        if (current && compareSpecHash(current.identity.specHash, target).kind === 'same' && !image) continue;
        if (current && image && current.image === image) continue;
        const previous = current
          ? this.d.exec.state.generation(name, current.identity.generation)?.spec
          : undefined;
        try {
          changed[name] = await this.member(operation, 'upgrade', target);
          if (previous) done.push({ name, previous });
        } catch (err) {
          // Stop at the first failure and roll back what the set changed, newest first.
          for (const prev of done.reverse()) {
            await this.member(operation, 'rollback', prev.previous).catch(() => undefined);
          }
          throw new SpcdError(
            'UPGRADE_FAILED',
            `set ${path}: upgrade of ${name} failed; rolled back ${done.map((x) => x.name).join(', ') || 'nothing else'}: ${(err as Error).message}`,
            { set: path, failed: name, rolledBack: done.map((x) => x.name) },
          );
        }
      }
      return { set: path, generations: changed };
    })();
    return this.d.operations.track(id, 'set-upgrade', path, run);
  }

  async adopt(name: string): Promise<OperationRef> {
    this.desiredSpec(name);
    const operation: StepOperation = { id: this.d.operations.newId('adopt'), kind: 'adopt' };
    return this.track(name, { verb: 'adopt', operation });
  }

  /** Forgets the adoption under the container's lock; the container runs on as it is. */
  async release(name: string): Promise<OperationRef> {
    this.desiredSpec(name);
    if (!this.d.exec.state.record(name)?.adopted)
      throw new SpcdError('NOT_FOUND', `${name} is not an adopted container`, { container: name });
    const op = { id: this.d.operations.newId('release'), kind: 'adopt' as const };
    const run = this.d.reconciler.runExclusive(name, op, async () => {
      const was = await this.d.exec.state.release(name);
      if (!was) throw new SpcdError('NOT_FOUND', `${name} is not an adopted container`, { container: name });
      this.d.exec.log.info({ container: name, id: was.id }, 'adoption released');
      return { container: name, id: was.id, generation: was.generation };
    });
    return this.d.operations.track(op.id, 'release', name, run);
  }

  async adoptScan(): Promise<AdoptScan> {
    return { containers: await this.d.exec.engine.describeUnlabeled() };
  }

  async reload(): Promise<OperationRef> {
    const id = this.d.operations.newId('reload');
    return this.d.operations.track(id, 'reload', 'definitions', this.d.reload());
  }
}
