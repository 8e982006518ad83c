/** Fake StatusView / Actions for the API and spcctl tests, and for bench/api.ts. */
import { SpcdError } from '../../agent/errors.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import type {
  Actions,
  AdoptScan,
  ContainerHealthView,
  ContainerStatus,
  GenerationDiffView,
  GenerationView,
  LogStreamOptions,
  OperationRef,
  PlanView,
  SetStatus,
  StatusDocument,
  StatusView,
} from '../../agent/api/types.js';

export function demoContainer(
  name: string,
  set: string,
  over: Partial<ContainerStatus> = {},
): ContainerStatus {
  return {
    name,
    set,
    generation: 3,
    image: 'spcd-demo/service:1',
    imageDigest: 'sha256:' + 'ab'.repeat(32),
    containerId: 'c0ffee' + name.length.toString(16).padStart(4, '0'),
    state: 'running',
    health: 'healthy',
    dockerHealth: null,
    restartCount: 0,
    startedAt: '2026-01-01T00:00:00.000Z',
    lastError: null,
    specHash: 'spec-' + name,
    configHash: 'cfg-' + name,
    operation: null,
    ...over,
  };
}

/** n containers spread over two top-level sets, one with a nested set. */
export function demoSets(n = 3): SetStatus[] {
  const compute: ContainerStatus[] = [];
  const neutron: ContainerStatus[] = [];
  const infra: ContainerStatus[] = [];
  for (let i = 0; i < n; i++) {
    const bucket = i % 3;
    if (bucket === 0) compute.push(demoContainer(i === 0 ? 'nova_compute' : `nova_${i}`, 'compute'));
    else if (bucket === 1)
      neutron.push(demoContainer(i === 1 ? 'neutron_agent' : `neutron_${i}`, 'compute/neutron'));
    else infra.push(demoContainer(i === 2 ? 'cron' : `infra_${i}`, 'infra'));
  }
  return [
    {
      name: 'compute',
      path: 'compute',
      description: 'Nova compute',
      containers: compute,
      sets: [
        {
          name: 'neutron',
          path: 'compute/neutron',
          description: 'Neutron agents',
          containers: neutron,
          sets: [],
        },
      ],
    },
    { name: 'infra', path: 'infra', description: 'Host services', containers: infra, sets: [] },
  ];
}

export class FakeStatus implements StatusView {
  readonly bus = new EventBus();
  logLines: string[] = ['line 1', 'line 2', 'line 3'];
  /** Set by a follow=1 logs call: push more lines, or end. */
  follower: { push(line: string): void; end(): void; stopped: boolean } | null = null;

  private rev = 1;

  /** With `revision`, the fake offers StatusView.revision(); call touch() after changing setList. */
  constructor(
    public setList: SetStatus[] = demoSets(),
    opts: { revision?: boolean } = {},
  ) {
    if (!opts.revision) this.revision = undefined;
  }

  revision?: () => number = () => this.rev;

  touch(): void {
    this.rev++;
  }

  async status(): Promise<StatusDocument> {
    return {
      version: '0.1.0-test',
      instance: 'test',
      host: { hostname: 'compute-1', kernel: '6.1.0' },
      engine: { available: true, version: '20.10.24' },
      sets: this.setList,
    };
  }
  sets(): readonly SetStatus[] {
    return this.setList;
  }
  set(path: string): SetStatus | undefined {
    const find = (l: readonly SetStatus[]): SetStatus | undefined => {
      for (const s of l) {
        if (s.path === path) return s;
        const inner = find(s.sets);
        if (inner) return inner;
      }
      return undefined;
    };
    return find(this.setList);
  }
  container(name: string): ContainerStatus | undefined {
    const walk = (l: readonly SetStatus[]): ContainerStatus | undefined => {
      for (const s of l) {
        const c = s.containers.find((x) => x.name === name) ?? walk(s.sets);
        if (c) return c;
      }
      return undefined;
    };
    return walk(this.setList);
  }
  health(name: string): ContainerHealthView | undefined {
    const c = this.container(name);
    if (!c) return undefined;
    return {
      name,
      status: c.health,
      dockerHealth: null,
      checks: [
        {
          name: 'port',
          status: 'healthy',
          consecutiveFailures: 0,
          consecutiveSuccesses: 4,
          history: [
            {
              at: '2026-01-01T00:00:10.000Z',
              ok: true,
              exitCode: 0,
              timedOut: false,
              durationMs: 12,
              output: 'ok',
            },
          ],
        },
        {
          name: 'rpc',
          status: 'unhealthy',
          consecutiveFailures: 2,
          consecutiveSuccesses: 0,
          history: [
            {
              at: '2026-01-01T00:00:10.000Z',
              ok: false,
              exitCode: null,
              timedOut: true,
              durationMs: 5000,
              output: 'timed out',
            },
          ],
        },
      ],
    };
  }
  generations(name: string): readonly GenerationView[] | undefined {
    if (!this.container(name)) return undefined;
    return [
      {
        generation: 3,
        image: 'spcd-demo/service:2',
        imageDigest: 'sha256:' + 'cd'.repeat(32),
        specHash: 's3',
        configHash: 'c3',
        createdAt: '2026-01-03T00:00:00.000Z',
        outcome: 'current',
      },
      {
        generation: 2,
        image: 'spcd-demo/service:1',
        imageDigest: null,
        specHash: 's2',
        configHash: 'c2',
        createdAt: '2026-01-02T00:00:00.000Z',
        outcome: 'committed',
      },
    ];
  }
  async generationDiff(name: string, from: number, to: number): Promise<GenerationDiffView | undefined> {
    const gens = this.generations(name);
    const a = gens?.find((g) => g.generation === from);
    const b = gens?.find((g) => g.generation === to);
    if (!a || !b) return undefined;
    return {
      name,
      from: a,
      to: b,
      ...(a.image === b.image ? {} : { image: { from: a.image, to: b.image } }),
      ...(a.imageDigest === b.imageDigest ? {} : { imageDigest: { from: a.imageDigest, to: b.imageDigest } }),
      spec: [{ path: 'environment.DEBUG', from: 'false', to: 'true' }],
      config: {
        changed: a.configHash !== b.configHash,
        filesKnown: true,
        files: [
          { path: 'nova.conf', change: 'modified', fromSha256: 'aa', toSha256: 'bb', diff: '-a\n+b\n' },
        ],
      },
    };
  }
  async plan(): Promise<PlanView> {
    return {
      items: [{ container: 'nova_compute', set: 'compute', action: 'recreate', reason: 'image changed' }],
      problems: [],
    };
  }
  subscribe(listener: (e: SpcdEvent) => void): () => void {
    return this.bus.subscribe(listener);
  }
  async logs(name: string, opts: LogStreamOptions): Promise<() => void> {
    if (!this.container(name)) throw new SpcdError('NOT_FOUND', `no container named ${name}`);
    const lines = this.logLines.slice(Math.max(0, this.logLines.length - opts.tail));
    for (const l of lines) opts.onLine(l);
    const f = { push: (l: string) => opts.onLine(l), end: () => opts.onEnd(), stopped: false };
    if (opts.follow) this.follower = f;
    else opts.onEnd();
    return () => {
      f.stopped = true;
    };
  }
}

/**
 * Actions that lock a container per operation: a second operation on a
 * locked container rejects CONFLICT, like the lead's real lock. release()
 * finishes an operation (publishing its events on the bus).
 */
/** What a reload answers when it retried one quarantined container, which left quarantine. */
const FAKE_RELOAD_RESULT = {
  containers: 2,
  changes: [{ kind: 'recover', reason: 'journal entry tried again' }],
  operations: [{ operationId: 'recover-1', kind: 'recover', container: 'cron', outcome: 'cleared' }],
};

export class FakeActions implements Actions {
  private seq = 0;
  readonly locked = new Map<string, string>();
  readonly calls: { kind: string; target: string; opts: unknown }[] = [];
  /** When set, operations finish by themselves after this many ms (with events). */
  autoFinishMs: number | null = null;
  failWith: SpcdError | null = null;

  constructor(
    private readonly status: FakeStatus,
    private readonly beginMs = 0,
  ) {}

  private async begin(
    kind: string,
    target: string,
    opts: unknown,
    container: boolean,
  ): Promise<OperationRef> {
    this.calls.push({ kind, target, opts });
    await new Promise((r) => setTimeout(r, this.beginMs));
    if (this.failWith) throw this.failWith;
    if (container) {
      const c = this.status.container(target);
      if (!c) throw new SpcdError('NOT_FOUND', `no container named ${target}`, { container: target });
      const expected = (opts as { expectedGeneration?: number }).expectedGeneration;
      if (expected !== undefined && expected !== c.generation) {
        throw new SpcdError(
          'GENERATION_MISMATCH',
          `expected generation ${expected}, current is ${c.generation}`,
          {
            expected,
            current: c.generation,
          },
        );
      }
      const owner = this.locked.get(target);
      if (owner)
        throw new SpcdError('CONFLICT', `${target} is busy with operation ${owner}`, { operationId: owner });
    }
    const ref: OperationRef = {
      operationId: `op-${++this.seq}`,
      kind,
      target,
      acceptedAt: new Date(0).toISOString(),
    };
    if (container) this.locked.set(target, ref.operationId);
    if (this.autoFinishMs !== null) {
      const ms = this.autoFinishMs;
      setTimeout(() => this.finish(ref, true), ms);
    }
    return ref;
  }

  /** Publishes a short operation story on the bus and frees the container. */
  finish(ref: OperationRef, ok: boolean): void {
    const bus = this.status.bus;
    const at = Date.now();
    bus.publish({
      type: 'operation',
      at,
      operationId: ref.operationId,
      kind: ref.kind,
      target: ref.target,
      // The phases spcd publishes (daemon/operations.ts): accepted, then succeeded or failed.
      phase: 'accepted',
    });
    bus.publish({
      type: 'pull-progress',
      at,
      operationId: ref.operationId,
      image: 'spcd-demo/service:2',
      status: 'Downloading',
      current: 50,
      total: 100,
    });
    bus.publish({
      type: 'upgrade-step',
      at,
      operationId: ref.operationId,
      container: ref.target,
      step: 'health-gate',
      generation: 4,
      outcome: 'done',
    });
    bus.publish({
      type: 'operation',
      at,
      operationId: ref.operationId,
      kind: ref.kind,
      target: ref.target,
      phase: ok ? 'succeeded' : 'failed',
      ...(ok ? {} : { error: { code: 'HEALTH_GATE_FAILED', message: 'not healthy in 60s' } }),
      ...(ok && ref.kind === 'reload' ? { result: FAKE_RELOAD_RESULT } : {}),
    });
    this.locked.delete(ref.target);
  }

  restart(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    return this.begin('restart', name, opts, true);
  }
  stop(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    return this.begin('stop', name, opts, true);
  }
  start(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef> {
    return this.begin('start', name, opts, true);
  }
  upgrade(name: string, opts: { image: string; expectedGeneration?: number }): Promise<OperationRef> {
    return this.begin('upgrade', name, opts, true);
  }
  rollback(name: string, opts: { toGeneration?: number; force?: boolean }): Promise<OperationRef> {
    return this.begin('rollback', name, opts, true);
  }
  upgradeSet(path: string, opts: { images?: Readonly<Record<string, string>> }): Promise<OperationRef> {
    if (!this.status.set(path))
      return Promise.reject(new SpcdError('NOT_FOUND', `no set ${path}`, { set: path }));
    return this.begin('upgrade-set', path, opts, false);
  }
  reload(): Promise<OperationRef> {
    return this.begin('reload', 'definitions', {}, false);
  }
  adopt(name: string): Promise<OperationRef> {
    return this.begin('adopt', name, {}, true);
  }
  release(name: string): Promise<OperationRef> {
    return this.begin('release', name, {}, true);
  }
  async adoptScan(): Promise<AdoptScan> {
    this.calls.push({ kind: 'adopt-scan', target: '', opts: {} });
    return {
      containers: [
        { name: 'nova_compute', definition: { image: 'kolla/nova-compute:2024.1', network: 'host' } },
      ],
    };
  }
}
