import { SpcdError } from '../errors.js';
import { specHash } from '../model/hash.js';
import { compareSpecHash } from '../model/hash-schemes.js';
import { isRunning } from '../model/observed.js';
import { allContainers, findSet, type ContainerSpec, type DesiredState } from '../model/spec.js';
import { vmSafetyViolations } from '../model/vm-safety.js';
import type { Actions, OperationRef } from '../api/types.js';
import type { ExecutorDeps } from '../executor/ports.js';
import type { PullPolicy } from '../executor/image.js';
import { upgradeContainer, type UpgradeResult } from '../executor/upgrade.js';
import { vmSafetyRefused } from '../executor/guard.js';
import { censusAfter, censusBefore } from '../executor/census.js';
import type { OperationKind, Reconciler } from '../reconciler/reconciler.js';
import type { Operations } from './operations.js';

export interface ActionDeps {
  readonly reconciler: Reconciler;
  readonly exec: ExecutorDeps;
  readonly operations: Operations;
  /** The definitions on disk (not pinned), for pins and set membership. */
  readonly definitions: () => DesiredState;
  readonly reload: () => Promise<Record<string, unknown>>;
}

/** The operator's verbs. Each takes its container's lock synchronously, then runs in the background. */
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

  /** Takes the container's lock now (CONFLICT at once when held), answers with the ref, runs in the background. */
  private begin(
    kind: OperationKind,
    name: string,
    fn: (opId: string) => Promise<Record<string, unknown> | void>,
  ): OperationRef {
    this.d.reconciler.assertFree(name);
    const id = this.d.operations.newId(kind);
    return this.d.operations.track(
      id,
      kind,
      name,
      this.d.reconciler.runExclusive(name, { id, kind }, () => fn(id)),
    );
  }

  private async guardStop(name: string): Promise<void> {
    const spec = this.desiredSpec(name);
    if (spec.role !== 'hypervisor') return;
    const vms = await this.d.exec.vms.runningVms();
    if (vms.length === 0) return;
    const p = this.d.reconciler.primary(name);
    const running = p ? this.d.exec.state.generation(name, p.identity.generation)?.spec : undefined;
    for (const s of [running ?? spec]) {
      const broken = vmSafetyViolations(s, { hybridWithControllers: false, unifiedOnly: false });
      if (broken.length > 0) {
        throw vmSafetyRefused(
          this.d.exec,
          'stop',
          `refusing to stop ${name}: ${vms.length} VM(s) running and its definition breaks ${broken.map((b) => b.rule).join(', ')}: ${broken[0]?.why}`,
          { container: name, rules: broken },
        );
      }
    }
  }

  async restart(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    const spec = this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('restart', name, async (opId) => {
      await this.guardStop(name);
      const p = this.d.reconciler.primary(name);
      if (!p) throw new SpcdError('NOT_FOUND', `${name} has no container yet`, { container: name });
      const running = this.d.exec.state.generation(name, p.identity.generation)?.spec.census;
      const census = isRunning(p) ? await censusBefore(this.d.exec, running ?? spec.census, p.id) : undefined;
      this.d.exec.health.pause(name);
      let windowMs: number;
      const t0 = Date.now();
      try {
        await this.d.exec.engine.stop(p.id, spec.stopGraceMs);
        await this.d.exec.engine.start(p.id);
        windowMs = Date.now() - t0;
      } finally {
        this.d.exec.health.resume(name);
      }
      const ctx = { operationId: opId, container: name, action: 'restart', containerId: p.id };
      await censusAfter(this.d.exec, census, spec.census, ctx);
      // stoppedAt: the census after the start makes the operation end later than the window.
      return { generation: p.identity.generation, windowMs, stoppedAt: new Date(t0).toISOString() };
    });
  }

  async stop(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    const spec = this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('stop', name, async () => {
      await this.guardStop(name);
      await this.d.exec.state.setHeldStopped(name, true);
      const p = this.d.reconciler.primary(name);
      if (p && isRunning(p)) await this.d.exec.engine.stop(p.id, spec.stopGraceMs);
      return { generation: p?.identity.generation ?? 0 };
    });
  }

  async start(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    this.desiredSpec(name);
    this.checkGeneration(name, opts.expectedGeneration);
    return this.begin('start', name, async () => {
      await this.d.exec.state.setHeldStopped(name, false);
      this.d.reconciler.clearFailure(name);
      const p = this.d.reconciler.primary(name);
      if (p && !isRunning(p)) await this.d.exec.engine.start(p.id);
      return { generation: p?.identity.generation ?? 0 };
    });
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
    const spec: ContainerSpec = { ...base, image: opts.image };
    return this.begin('upgrade', name, (opId) => this.applySpec(opId, 'upgrade', spec, opts));
  }

  async rollback(name: string, opts: { toGeneration?: number; force?: boolean }): Promise<OperationRef> {
    this.assertDefinitionsLoaded('roll back');
    this.desiredSpec(name);
    const target = this.rollbackTarget(name, opts.toGeneration);
    return this.begin('rollback', name, (opId) =>
      this.applySpec(opId, 'rollback', target.spec, { force: opts.force === true, from: target.generation }),
    );
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

  /** Runs the transaction to a spec and, on success, pins it so the definitions do not undo it. */
  private async applySpec(
    opId: string,
    kind: 'upgrade' | 'rollback' | 'recreate',
    spec: ContainerSpec,
    opts: { pull?: PullPolicy; expectDigest?: string; force?: boolean; from?: number },
  ): Promise<Record<string, unknown>> {
    const name = spec.name;
    const result: UpgradeResult = await upgradeContainer(this.d.exec, {
      operationId: opId,
      kind,
      spec,
      specHash: specHash(spec),
      current: this.d.reconciler.primary(name),
      pull: opts.pull ?? 'missing',
      ...(opts.expectDigest ? { expectDigest: opts.expectDigest } : {}),
      ...(opts.from !== undefined ? { from: opts.from } : {}),
      force: opts.force === true,
      reason: `${kind} requested`,
    });
    const definition = this.definitionOf(name);
    await this.d.exec.state.setPin(
      name,
      specHash(spec) === specHash(definition) ? undefined : { spec, definitionHash: specHash(definition) },
    );
    this.d.reconciler.setDesired(
      [...this.d.reconciler.desiredContainers()].map((c) =>
        c.spec.name === name ? { ...c, spec, specHash: specHash(spec) } : c,
      ),
    );
    return { ...result } as unknown as Record<string, unknown>;
  }

  async upgradeSet(path: string, opts: { images?: Readonly<Record<string, string>> }): Promise<OperationRef> {
    const set = findSet(this.d.definitions().sets, path);
    if (!set) throw new SpcdError('NOT_FOUND', `no set ${path}`, { set: path });
    const members = new Set(allContainers([set]).map((c) => c.name));
    for (const name of Object.keys(opts.images ?? {})) {
      if (!members.has(name))
        throw new SpcdError('UNPROCESSABLE', `${name} is not in set ${path}`, { set: path, container: name });
    }
    const ordered = this.d.reconciler.desiredContainers().filter((c) => members.has(c.spec.name));
    const id = this.d.operations.newId('set-upgrade');
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
          const r = (await this.d.reconciler.runExclusive(name, { id, kind: 'set-upgrade' }, () =>
            this.applySpec(id, 'upgrade', target, {}),
          )) as unknown as UpgradeResult;
          changed[name] = r.generation;
          if (previous) done.push({ name, previous });
        } catch (err) {
          // Stop at the first failure and roll back what the set changed, newest first.
          for (const prev of done.reverse()) {
            await this.d.reconciler
              .runExclusive(prev.name, { id, kind: 'set-upgrade' }, () =>
                this.applySpec(id, 'rollback', prev.previous, {}),
              )
              .catch(() => undefined);
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

  async reload(): Promise<OperationRef> {
    const id = this.d.operations.newId('reload');
    return this.d.operations.track(id, 'reload', 'definitions', this.d.reload());
  }
}
