import { SpcdError } from '../errors.js';
import type { ContainerSpec, DesiredState } from '../model/spec.js';
import type { Actions, AdoptScan, OperationRef } from '../api/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import { assertImageAllowed, type PullPolicy } from '../executor/image.js';
import type { Intent, StepOperation } from '../planner/types.js';
import type { Operations } from '../reconciler/operations.js';
import type { Reconciler } from '../reconciler/reconciler.js';
import { changeIntent, upgradeSet, type ChangeOptions } from '../reconciler/set-upgrade.js';

/** The engine's containers that carry no spcd labels, each with the definition it would be adopted as. */
export interface UnlabeledScan {
  describeUnlabeled(): Promise<AdoptScan['containers']>;
}

export interface ActionDeps {
  readonly reconciler: Reconciler;
  /** The recorded generations and pins, and the node's image policy. */
  readonly exec: Pick<ExecutorDeps, 'state' | 'imagePolicy'>;
  readonly unlabeled: UnlabeledScan;
  readonly operations: Operations;
  /** The definitions on disk (not pinned), for pins and set membership. */
  readonly definitions: () => DesiredState;
  readonly reload: () => Promise<Record<string, unknown>>;
}

/**
 * The operator's verbs. Each checks its request, writes its intent (CONFLICT
 * at once when the container is locked or has one), asks for a pass and
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
    const why = this.d.reconciler.keptBecause();
    if (why === null) return;
    throw new SpcdError(
      'DEFINITIONS_NOT_LOADED',
      `cannot ${verb} while the definitions cannot be read (${why}); fix them and reload first`,
      { reason: why },
    );
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

  private change(
    operation: StepOperation,
    change: 'upgrade' | 'rollback',
    spec: ContainerSpec,
    opts: ChangeOptions,
  ): Intent {
    return changeIntent(this.d.definitions(), operation, change, spec, opts);
  }

  async upgradeSet(path: string, opts: { images?: Readonly<Record<string, string>> }): Promise<OperationRef> {
    return upgradeSet(this.d, path, opts);
  }

  async adopt(name: string): Promise<OperationRef> {
    this.desiredSpec(name);
    const operation: StepOperation = { id: this.d.operations.newId('adopt'), kind: 'adopt' };
    return this.track(name, { verb: 'adopt', operation });
  }

  /** Forgets the adoption, the container locked by the reconciler meanwhile; the container runs on as it is. */
  async release(name: string): Promise<OperationRef> {
    this.desiredSpec(name);
    if (!this.d.exec.state.record(name)?.adopted)
      throw new SpcdError('NOT_FOUND', `${name} is not an adopted container`, { container: name });
    const id = this.d.operations.newId('release');
    return this.d.operations.track(id, 'release', name, this.d.reconciler.releaseAdoption(name, id));
  }

  async adoptScan(): Promise<AdoptScan> {
    return { containers: await this.d.unlabeled.describeUnlabeled() };
  }

  async reload(): Promise<OperationRef> {
    const id = this.d.operations.newId('reload');
    return this.d.operations.track(id, 'reload', 'definitions', this.d.reload());
  }
}
