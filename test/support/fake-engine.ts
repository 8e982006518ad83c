import { SpcdError } from '../../agent/errors.js';
import type {
  CallOptions,
  CreateRequest,
  Engine,
  EngineEvent,
  EventSubscription,
  ExecRequest,
  ExecResult,
  ImageInfo,
  PullRequest,
  TaskContainer,
  VolumeCreateRequest,
  VolumeInfo,
} from '../../agent/engine/types.js';
import type { UnlabeledContainer } from '../../agent/model/adoption.js';
import { LABEL } from '../../agent/model/labels.js';
import type { ObservedContainer } from '../../agent/model/observed.js';
import { volumeNames } from '../../agent/model/spec.js';
import { FakeEngineCore, type FakeContainer } from './fake-engine-core.js';

export type { CallKind, Fault, FakeContainer } from './fake-engine-core.js';

/**
 * The Docker engine in memory, behind the same interfaces as DockerEngine
 * (type-checked: `implements Engine`, no casts). Time comes from the
 * injected clock. Faults: fail or hang the nth call of a kind, drop or stall
 * the event stream, containers that exit (now, or at every start).
 */
export class FakeEngine extends FakeEngineCore implements Engine {
  // ContainerEngine.

  async ping(_o?: CallOptions): Promise<void> {
    await this.enter('ping', '');
  }

  async listManaged(instance: string, _o?: CallOptions): Promise<ObservedContainer[]> {
    // What the engine saw when the call began: a late answer is a stale one.
    const seen = [...this.containers.values()]
      .filter((c) => c.identity.instance === instance && c.task === undefined)
      .map((c) => this.observe(c));
    for (const a of this.adopted()) {
      const c = this.containers.get(a.id);
      if (c?.unlabeled && a.identity.instance === instance)
        seen.push({ ...this.observe(c), identity: a.identity });
    }
    await this.enter('listManaged', instance);
    return seen;
  }

  async listTasks(instance: string, _o?: CallOptions): Promise<TaskContainer[]> {
    await this.enter('listTasks', instance);
    return [...this.containers.values()]
      .filter((c) => c.identity.instance === instance && c.task !== undefined)
      .map((c) => ({
        id: c.id,
        name: c.name,
        identity: c.identity,
        task: c.task ?? '',
        running: c.state === 'running',
      }));
  }

  async inspect(id: string, _o?: CallOptions): Promise<ObservedContainer | undefined> {
    await this.enter('inspect', id);
    const c = this.containers.get(id);
    if (!c?.unlabeled) return c ? this.observe(c) : undefined;
    const a = this.adopted().find((x) => x.id === id);
    return a ? { ...this.observe(c), identity: a.identity } : undefined;
  }

  async inspectUnlabeled(
    name: string,
    expected: CreateRequest | undefined,
    _o?: CallOptions,
  ): Promise<UnlabeledContainer | undefined> {
    await this.enter('inspectUnlabeled', name);
    const c = this.byName(name);
    if (!c?.unlabeled) return undefined;
    const image =
      expected && expected.spec.image !== c.image
        ? [`image: definition ${expected.spec.image}, running ${c.image}`]
        : [];
    return { ...this.observe(c), differences: expected ? [...image, ...c.unlabeled.differences] : [] };
  }

  async describeUnlabeled(
    _o?: CallOptions,
  ): Promise<{ name: string; definition: Record<string, unknown> }[]> {
    await this.enter('describeUnlabeled', '');
    return [...this.containers.values()]
      .filter((c) => c.unlabeled && c.state === 'running')
      .map((c) => ({ name: c.name, definition: { image: c.image } }));
  }

  async create(req: CreateRequest, _o?: CallOptions): Promise<string> {
    const name = req.name ?? req.spec.name;
    await this.enter('create', name);
    if (this.byName(name)) throw new SpcdError('ENGINE_CONFLICT', `the name ${name} is in use`);
    if (!this.images.has(req.spec.image))
      throw new SpcdError('ENGINE_NOT_FOUND', `no image ${req.spec.image}`);
    // As Docker does: a volume a container binds and nobody made is made at create, unlabelled.
    for (const v of volumeNames(req.spec))
      if (!this.volumes.has(v)) this.volumes.set(v, { name: v, driver: 'local', labels: {} });
    const id = `${(++this.seq).toString(16).padStart(4, '0')}${'c'.repeat(60)}`;
    const c: FakeContainer = {
      id,
      name,
      identity: req.identity,
      spec: req.spec,
      image: req.spec.image,
      task: req.extraLabels?.[LABEL.task],
      state: 'created',
      startedAt: '',
      finishedAt: '',
      exitCode: 0,
      pid: 0,
    };
    this.containers.set(id, c);
    this.emit(c, 'create');
    return id;
  }

  async start(id: string, _o?: CallOptions): Promise<void> {
    await this.enter('start', id);
    const c = this.must(id);
    if (c.state === 'running') return;
    c.state = 'running';
    c.startedAt = this.iso();
    c.pid = 1000 + this.seq++;
    this.emit(c, 'start');
    const code = this.exitOnStart.get(c.image);
    if (code !== undefined) this.exit(id, code);
  }

  /** Each stop's container id and grace, in call order. */
  readonly stopGraces: { id: string; graceMs: number }[] = [];

  async stop(id: string, graceMs: number, _o?: CallOptions): Promise<void> {
    this.stopGraces.push({ id, graceMs });
    await this.enter('stop', id);
    const c = this.must(id);
    if (c.state !== 'running' && c.state !== 'paused' && c.state !== 'restarting') return;
    c.state = 'exited';
    c.exitCode = 0;
    c.pid = 0;
    c.finishedAt = this.iso();
    this.emit(c, 'die', 0);
    this.emit(c, 'stop');
  }

  async kill(id: string, _signal: string, _o?: CallOptions): Promise<void> {
    await this.enter('kill', id);
    const c = this.must(id);
    if (c.state !== 'running') return;
    this.exit(id, 137);
  }

  async remove(id: string, _o?: CallOptions): Promise<void> {
    await this.enter('remove', id);
    const c = this.containers.get(id);
    if (!c) return;
    this.containers.delete(id);
    this.emit(c, 'destroy');
  }

  async rename(id: string, name: string, _o?: CallOptions): Promise<void> {
    await this.enter('rename', `${id} ${name}`);
    const c = this.must(id);
    const other = this.byName(name);
    if (other && other.id !== id) throw new SpcdError('ENGINE_CONFLICT', `the name ${name} is in use`);
    c.name = name;
  }

  async wait(id: string, _timeoutMs: number, _o?: CallOptions): Promise<number> {
    await this.enter('wait', id);
    return this.must(id).exitCode;
  }

  // ImageEngine.

  async pull(req: PullRequest): Promise<ImageInfo> {
    await this.enter('pull', req.image);
    const info = this.registry.get(req.image);
    if (!info) throw new SpcdError('IMAGE_PULL_FAILED', `${req.image}: not found in the registry`);
    req.onProgress?.({ image: req.image, status: 'Downloaded newer image' });
    this.images.set(req.image, info);
    return info;
  }

  async imageInfo(ref: string, _o?: CallOptions): Promise<ImageInfo | undefined> {
    await this.enter('imageInfo', ref);
    return this.images.get(ref);
  }

  // VolumeEngine: an existing volume is answered as it is, as Docker's create does.

  async volumeInfo(name: string, _o?: CallOptions): Promise<VolumeInfo | undefined> {
    await this.enter('volumeInfo', name);
    return this.volumes.get(name);
  }

  async createVolume(req: VolumeCreateRequest, _o?: CallOptions): Promise<VolumeInfo> {
    await this.enter('createVolume', req.name);
    const made = this.volumes.get(req.name) ?? { name: req.name, driver: 'local', labels: { ...req.labels } };
    this.volumes.set(req.name, made);
    return made;
  }

  // ExecEngine, EventEngine, LogEngine.

  async exec(containerId: string, req: ExecRequest): Promise<ExecResult> {
    await this.enter('exec', containerId);
    return this.execResult(containerId, req);
  }

  subscribe(instance: string, onEvent: (e: EngineEvent) => void): EventSubscription {
    const listener = (e: EngineEvent): void => {
      if (e.kind === 'stream-lost' || e.labels[LABEL.instance] === instance) onEvent(e);
    };
    this.subscribers.add(listener);
    return { close: () => this.subscribers.delete(listener) };
  }

  async logs(
    id: string,
    o: { tail: number; follow: boolean; onLine: (line: string) => void; onEnd: () => void },
  ): Promise<() => void> {
    await this.enter('logs', id);
    this.must(id);
    o.onEnd();
    return () => undefined;
  }
}
