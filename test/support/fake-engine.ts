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
import type { AdoptedIdentity, UnlabeledContainer } from '../../agent/model/adoption.js';
import type { Clock } from '../../agent/model/clock.js';
import { LABEL, type Identity } from '../../agent/model/labels.js';
import type { EngineState, ObservedContainer } from '../../agent/model/observed.js';
import { volumeNames, type ContainerSpec } from '../../agent/model/spec.js';
import { containerSpec } from './spec.js';

/** Every call the engine's interfaces offer; faults are keyed by these. */
export type CallKind =
  | 'ping'
  | 'listManaged'
  | 'listTasks'
  | 'inspect'
  | 'inspectUnlabeled'
  | 'describeUnlabeled'
  | 'create'
  | 'start'
  | 'stop'
  | 'kill'
  | 'remove'
  | 'rename'
  | 'wait'
  | 'pull'
  | 'imageInfo'
  | 'exec'
  | 'logs'
  | 'volumeInfo'
  | 'createVolume';

/** A fault for the nth call of a kind (1-based, counted from when it is set), or for every call from then on. */
export type Fault =
  | { readonly kind: CallKind; readonly nth?: number; readonly fail: SpcdError }
  | { readonly kind: CallKind; readonly nth?: number; readonly hang: true };

export interface FakeContainer {
  readonly id: string;
  name: string;
  readonly identity: Identity;
  readonly spec: ContainerSpec;
  readonly image: string;
  readonly task: string | undefined;
  state: EngineState;
  startedAt: string;
  finishedAt: string;
  exitCode: number;
  pid: number;
  /** A container spcd did not create (no spcd labels): how it differs from any definition. */
  unlabeled?: { readonly differences: readonly string[] };
}

interface ArmedFault {
  readonly fault: Fault;
  /** Calls of its kind still to let through before it strikes; undefined: every call. */
  remaining: number | undefined;
}

interface Hung {
  readonly kind: CallKind;
  readonly resolve: () => void;
  readonly reject: (e: Error) => void;
}

/**
 * The Docker engine in memory, behind the same interfaces as DockerEngine
 * (type-checked: `implements Engine`, no casts). Time comes from the
 * injected clock. Faults: fail or hang the nth call of a kind, drop or stall
 * the event stream, containers that exit (now, or at every start).
 */
export class FakeEngine implements Engine {
  readonly containers = new Map<string, FakeContainer>();
  /** Named volumes by name; no call removes one (a container's removal leaves its volumes). */
  readonly volumes = new Map<string, VolumeInfo>();
  private readonly images = new Map<string, ImageInfo>();
  /** Images a pull can fetch (the registry). */
  private readonly registry = new Map<string, ImageInfo>();
  private readonly faults: ArmedFault[] = [];
  private readonly hung: Hung[] = [];
  private readonly subscribers = new Set<(e: EngineEvent) => void>();
  private readonly exitOnStart = new Map<string, number>();
  private readonly counts = new Map<CallKind, number>();
  private stalled = false;
  /** spcd was killed: its calls never return (a new spcd calls through revive()). */
  private dead = false;
  private seq = 0;
  /** Every call made, in order (kind and its first argument). */
  readonly calls: { kind: CallKind; arg: string }[] = [];
  /** What an exec answers; a check script's outcome. */
  execResult: (containerId: string, req: ExecRequest) => ExecResult = () => ({
    exitCode: 0,
    timedOut: false,
    output: '',
    durationMs: 1,
  });

  /** The adopted containers (the state file's records): listManaged and inspect answer them with this identity. */
  adopted: () => readonly AdoptedIdentity[] = () => [];

  constructor(private readonly clock: Clock) {}

  // Set-up and faults.

  /** An image present locally (and in the registry). */
  addImage(ref: string, info: Partial<ImageInfo> = {}): ImageInfo {
    const full: ImageInfo = { id: `sha256:${ref}`, repoDigests: [], labels: {}, ...info };
    this.images.set(ref, full);
    this.registry.set(ref, full);
    return full;
  }

  /** An image only the registry has: a pull fetches it. */
  addRemoteImage(ref: string, info: Partial<ImageInfo> = {}): void {
    this.registry.set(ref, { id: `sha256:${ref}`, repoDigests: [], labels: {}, ...info });
  }

  fault(f: Fault): void {
    this.faults.push({ fault: f, remaining: f.nth === undefined ? undefined : f.nth - 1 });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  /** Calls of a kind made so far. */
  count(kind: CallKind): number {
    return this.counts.get(kind) ?? 0;
  }

  /** Calls now hanging. */
  hanging(): CallKind[] {
    return this.hung.map((h) => h.kind);
  }

  /** Ends every hanging call (of a kind) as its deadline would: ENGINE_TIMEOUT. */
  releaseHung(kind?: CallKind): void {
    for (const h of this.takeHung(kind))
      h.reject(new SpcdError('ENGINE_TIMEOUT', `${h.kind} passed its deadline`));
  }

  /** Lets every hanging call (of a kind) go on: it answers late (a listing with what it saw when it began). */
  answerHung(kind?: CallKind): void {
    for (const h of this.takeHung(kind)) h.resolve();
  }

  private takeHung(kind: CallKind | undefined): Hung[] {
    const taken = this.hung.filter((h) => kind === undefined || h.kind === kind);
    for (const h of taken) this.hung.splice(this.hung.indexOf(h), 1);
    return taken;
  }

  /** Containers of this image exit with `code` right after each start. */
  crashOnStart(image: string, code: number): void {
    this.exitOnStart.set(image, code);
  }

  /** A running container exits on its own. */
  exit(id: string, code: number): void {
    const c = this.must(id);
    c.state = 'exited';
    c.exitCode = code;
    c.pid = 0;
    c.finishedAt = this.iso();
    this.emit(c, 'die', code);
  }

  /** The event stream breaks: every subscriber hears stream-lost and nothing more. */
  dropEvents(error = new Error('connection reset')): void {
    const subs = [...this.subscribers];
    this.subscribers.clear();
    for (const s of subs) s({ kind: 'stream-lost', error });
  }

  /** Events stop arriving (the stream stays open); resumeEvents() lets new ones through. */
  stallEvents(): void {
    this.stalled = true;
  }

  resumeEvents(): void {
    this.stalled = false;
  }

  /**
   * The spcd process using this engine dies (SIGKILL): from now on its calls
   * never return, so no line of it runs again; the containers stay as they
   * are. revive() is the next spcd.
   */
  processKilled(): void {
    this.dead = true;
  }

  killed(): boolean {
    return this.dead;
  }

  revive(): void {
    this.dead = false;
  }

  /**
   * A running container someone else created (no spcd labels), as
   * kolla-ansible leaves one; `differences` is what inspectUnlabeled reports
   * beside an image that differs from the definition's.
   */
  addUnlabeled(name: string, image: string, differences: readonly string[] = []): FakeContainer {
    const id = `${(++this.seq).toString(16).padStart(4, '0')}${'a'.repeat(60)}`;
    const identity = { instance: '', set: '', container: name, generation: 0, specHash: '', configHash: '' };
    const spec = containerSpec(name, { image });
    const c: FakeContainer = {
      id,
      name,
      identity,
      spec,
      image,
      task: undefined,
      state: 'running',
      startedAt: this.iso(),
      finishedAt: '',
      exitCode: 0,
      pid: 1000 + this.seq++,
      unlabeled: { differences },
    };
    this.containers.set(id, c);
    return c;
  }

  byName(name: string): FakeContainer | undefined {
    return [...this.containers.values()].find((c) => c.name === name);
  }

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

  // Internals.

  /** Counts the call and applies an armed fault: throws, hangs, or lets it through. */
  private async enter(kind: CallKind, arg: string): Promise<void> {
    if (this.dead) await new Promise<never>(() => undefined);
    this.calls.push({ kind, arg });
    this.counts.set(kind, this.count(kind) + 1);
    // Like a real call, the answer comes asynchronously.
    await Promise.resolve();
    if (this.dead) await new Promise<never>(() => undefined);
    for (const [i, a] of this.faults.entries()) {
      if (a.fault.kind !== kind) continue;
      if (a.remaining !== undefined && a.remaining > 0) {
        a.remaining -= 1;
        continue;
      }
      if (a.remaining !== undefined) this.faults.splice(i, 1);
      if ('fail' in a.fault) throw a.fault.fail;
      await new Promise<void>((resolve, reject) => this.hung.push({ kind, resolve, reject }));
      return;
    }
  }

  private must(id: string): FakeContainer {
    const c = this.containers.get(id);
    if (!c) throw new SpcdError('ENGINE_NOT_FOUND', `no container ${id.slice(0, 12)}`);
    return c;
  }

  private observe(c: FakeContainer): ObservedContainer {
    return {
      id: c.id,
      name: c.name,
      identity: c.identity,
      state: c.state,
      image: c.image,
      imageId: this.images.get(c.image)?.id ?? '',
      startedAt: c.startedAt,
      finishedAt: c.finishedAt,
      exitCode: c.exitCode,
      pid: c.pid,
    };
  }

  private iso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  private emit(
    c: FakeContainer,
    action: 'create' | 'start' | 'die' | 'stop' | 'destroy',
    exitCode?: number,
  ): void {
    if (this.stalled) return;
    const e: EngineEvent = {
      kind: 'container',
      action,
      id: c.id,
      name: c.name,
      labels: { [LABEL.instance]: c.identity.instance },
      ...(exitCode !== undefined ? { exitCode } : {}),
      timeNano: this.clock.now() * 1e6,
    };
    for (const s of [...this.subscribers]) s(e);
  }
}
