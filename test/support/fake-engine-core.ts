import { SpcdError } from '../../agent/errors.js';
import type {
  EngineEvent,
  ExecRequest,
  ExecResult,
  ImageInfo,
  VolumeInfo,
} from '../../agent/engine/types.js';
import type { AdoptedIdentity } from '../../agent/model/adoption.js';
import type { Clock } from '../../agent/model/clock.js';
import { LABEL, type Identity } from '../../agent/model/labels.js';
import type { EngineState, ObservedContainer } from '../../agent/model/observed.js';
import { type ContainerSpec } from '../../agent/model/spec.js';
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
 * The in-memory engine's state and its controls (set-up, faults, hung calls,
 * the event stream, a killed spcd); FakeEngine (fake-engine.ts) answers the
 * engine's interfaces from it.
 */
export class FakeEngineCore {
  readonly containers = new Map<string, FakeContainer>();
  /** Named volumes by name; no call removes one (a container's removal leaves its volumes). */
  readonly volumes = new Map<string, VolumeInfo>();
  protected readonly images = new Map<string, ImageInfo>();
  /** Images a pull can fetch (the registry). */
  protected readonly registry = new Map<string, ImageInfo>();
  protected readonly faults: ArmedFault[] = [];
  protected readonly hung: Hung[] = [];
  protected readonly subscribers = new Set<(e: EngineEvent) => void>();
  protected readonly exitOnStart = new Map<string, number>();
  protected readonly counts = new Map<CallKind, number>();
  protected stalled = false;
  /** spcd was killed: its calls never return (a new spcd calls through revive()). */
  protected dead = false;
  protected seq = 0;
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

  constructor(protected readonly clock: Clock) {}

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

  protected takeHung(kind: CallKind | undefined): Hung[] {
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

  // Internals.

  /** Counts the call and applies an armed fault: throws, hangs, or lets it through. */
  protected async enter(kind: CallKind, arg: string): Promise<void> {
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

  protected must(id: string): FakeContainer {
    const c = this.containers.get(id);
    if (!c) throw new SpcdError('ENGINE_NOT_FOUND', `no container ${id.slice(0, 12)}`);
    return c;
  }

  protected observe(c: FakeContainer): ObservedContainer {
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

  protected iso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  protected emit(
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
