import type Dockerode from 'dockerode';
import type { Logger } from '../log.js';
import { SpcdError } from '../errors.js';
import { decodeIdentity, LABEL, type Identity } from '../model/labels.js';
import type { ObservedContainer } from '../model/observed.js';
import { createBody } from './create-options.js';
import { DEADLINES } from './deadlines.js';
import { loadDockerode } from './load-dockerode.js';
import { engineKind, forPodman, healthStatus, podmanRefusal, type EngineKind } from './dialect.js';
import { runExec } from './exec.js';
import { mapEngineError, withDeadline } from './map-error.js';
import { pullImage } from './pull.js';
import { subscribeEvents } from './events.js';
import { streamLogs } from './logs.js';
import { createVolume, inspectVolume } from './volumes.js';
import { describeUnlabeled, engineFacts, inspectUnlabeled } from './unlabeled.js';
import type { AdoptedIdentity, UnlabeledContainer } from '../model/adoption.js';
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
} from './types.js';

export interface EngineInfo {
  /** Docker, or Podman's Docker-compatible service. */
  readonly kind: EngineKind;
  readonly version: string;
  readonly apiVersion: string;
  readonly liveRestore: boolean;
  readonly cgroupVersion: string;
  readonly cgroupDriver: string;
  readonly storageDriver: string;
  /** Where the engine keeps images: DockerRootDir (Podman's graph root). */
  readonly rootDir?: string;
}

interface InspectInfo {
  Id: string;
  Name: string;
  Image: string;
  Config: { Image: string; Labels: Record<string, string> | null };
  State: {
    Status: string;
    Pid: number;
    ExitCode: number;
    StartedAt: string;
    FinishedAt: string;
    Health?: { Status?: string } | null;
    Healthcheck?: { Status?: string } | null;
  };
}

const INSPECT_PARALLEL = 8;

/** `adopted`: the identity an adoption record gives a container without labels. */
function toObserved(info: InspectInfo, adopted?: Identity): ObservedContainer | undefined {
  const identity = decodeIdentity(info.Config.Labels ?? undefined) ?? adopted;
  if (!identity) return undefined;
  const health = healthStatus(info.State);
  return {
    ...engineFacts(info),
    identity,
    ...(health === 'starting' || health === 'healthy' || health === 'unhealthy'
      ? { dockerHealth: health }
      : {}),
  };
}

/**
 * The Docker engine behind spcd's narrow interfaces. The only dockerode user.
 * Inspect results are cached per (id, state) from the list, so a re-list of
 * 200 unchanged containers costs one API call.
 */
export class DockerEngine implements Engine {
  private readonly docker: Dockerode;
  private readonly inspectCache = new Map<string, { key: string; value: ObservedContainer | undefined }>();

  /**
   * `adopted`: the containers adopted without labels (their records in the
   * state file); listManaged and inspect answer them with that identity.
   */
  /** Which engine answers: the operator's --engine, or asked once (a failed ask is asked again). */
  private kind: Promise<EngineKind> | undefined;

  constructor(
    private readonly opts: {
      socketPath: string;
      log: Logger;
      adopted?: () => readonly AdoptedIdentity[];
      /** The engine the operator named; undefined: read from the engine's /version when first needed. */
      engine?: EngineKind;
    },
  ) {
    if (opts.engine) this.kind = Promise.resolve(opts.engine);
    const Docker = loadDockerode();
    this.docker = new Docker({ socketPath: opts.socketPath });
  }

  async ping(o?: CallOptions): Promise<void> {
    await withDeadline('ping', DEADLINES.ping, o?.signal, (abortSignal) =>
      (this.docker.ping as unknown as (o: object) => Promise<unknown>).call(this.docker, { abortSignal }),
    );
  }

  async info(o?: CallOptions): Promise<EngineInfo> {
    const [info, version] = await withDeadline('info', DEADLINES.info, o?.signal, (abortSignal) =>
      Promise.all([
        (this.docker.info as unknown as (o: object) => Promise<Record<string, unknown>>).call(this.docker, {
          abortSignal,
        }),
        (this.docker.version as unknown as (o: object) => Promise<Record<string, unknown>>).call(
          this.docker,
          {
            abortSignal,
          },
        ),
      ]),
    );
    return {
      kind: engineKind(version as Parameters<typeof engineKind>[0]),
      version: String(version.Version ?? ''),
      apiVersion: String(version.ApiVersion ?? ''),
      liveRestore: info.LiveRestoreEnabled === true,
      cgroupVersion: String(info.CgroupVersion ?? ''),
      cgroupDriver: String(info.CgroupDriver ?? ''),
      storageDriver: String(info.Driver ?? ''),
      ...(typeof info.DockerRootDir === 'string' ? { rootDir: info.DockerRootDir } : {}),
    };
  }

  async listManaged(instance: string, o?: CallOptions): Promise<ObservedContainer[]> {
    const list = await withDeadline('list containers', DEADLINES.list, o?.signal, (abortSignal) =>
      this.docker.listContainers({
        all: true,
        filters: { label: [`${LABEL.instance}=${instance}`] },
        abortSignal,
      } as Dockerode.ContainerListOptions),
    );
    const seen = new Set<string>();
    const wanted: { id: string; key: string }[] = [];
    for (const item of list) {
      seen.add(item.Id);
      if (!decodeIdentity(item.Labels) || item.Labels[LABEL.task] !== undefined) continue;
      wanted.push({ id: item.Id, key: `${item.State}|${item.Status.startsWith('Up') ? 'up' : item.Status}` });
    }
    // Inspect what changed since the last list, a few at a time (adoption of 200 containers).
    // The answer is built from what this listing holds, not the cache: an event may drop a
    // cache entry while the inspects are out, and the container must not vanish from the list.
    const found = new Map<string, ObservedContainer | undefined>();
    const stale: typeof wanted = [];
    for (const w of wanted) {
      const cached = this.inspectCache.get(w.id);
      if (cached?.key === w.key) found.set(w.id, cached.value);
      else stale.push(w);
    }
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < stale.length) {
        const w = stale[next++]!;
        const value = await this.inspect(w.id, o);
        found.set(w.id, value);
        this.inspectCache.set(w.id, { key: w.key, value });
      }
    };
    await Promise.all(Array.from({ length: Math.min(INSPECT_PARALLEL, stale.length) }, worker));
    const out: ObservedContainer[] = [];
    for (const w of wanted) {
      const value = found.get(w.id);
      if (value) out.push(value);
    }
    // Adopted containers carry no labels: each is inspected by the id its record holds.
    for (const a of this.opts.adopted?.() ?? []) {
      const value = await this.inspect(a.id, o);
      if (value && value.identity.instance === instance) out.push(value);
    }
    for (const id of this.inspectCache.keys()) if (!seen.has(id)) this.inspectCache.delete(id);
    return out;
  }

  async listTasks(instance: string, o?: CallOptions): Promise<TaskContainer[]> {
    const list = await withDeadline('list task containers', DEADLINES.list, o?.signal, (abortSignal) =>
      this.docker.listContainers({
        all: true,
        filters: { label: [`${LABEL.instance}=${instance}`, LABEL.task] },
        abortSignal,
      } as Dockerode.ContainerListOptions),
    );
    const out: TaskContainer[] = [];
    for (const item of list) {
      const identity = decodeIdentity(item.Labels);
      const task = item.Labels[LABEL.task];
      if (!identity || task === undefined) continue;
      const name = (item.Names[0] ?? item.Id).replace(/^\//, '');
      out.push({ id: item.Id, name, identity, task, running: item.State === 'running' });
    }
    return out;
  }

  /** Forget what we know of a container (called on its events). */
  invalidate(id: string): void {
    this.inspectCache.delete(id);
  }

  async inspect(id: string, o?: CallOptions): Promise<ObservedContainer | undefined> {
    try {
      const info = await withDeadline(
        `inspect ${id.slice(0, 12)}`,
        DEADLINES.inspect,
        o?.signal,
        (abortSignal) => this.docker.getContainer(id).inspect({ abortSignal } as object),
      );
      const adopted = this.opts.adopted?.().find((a) => a.id === id);
      return toObserved(info as unknown as InspectInfo, adopted?.identity);
    } catch (err) {
      if (err instanceof SpcdError && err.code === 'ENGINE_NOT_FOUND') return undefined;
      throw err;
    }
  }

  inspectUnlabeled(
    name: string,
    expected: CreateRequest | undefined,
    o?: CallOptions,
  ): Promise<UnlabeledContainer | undefined> {
    return inspectUnlabeled(this.docker, name, expected, o);
  }

  async describeUnlabeled(o?: CallOptions): Promise<{ name: string; definition: Record<string, unknown> }[]> {
    const list = await withDeadline('list containers', DEADLINES.list, o?.signal, (abortSignal) =>
      this.docker.listContainers({ abortSignal } as Dockerode.ContainerListOptions),
    );
    const out: { name: string; definition: Record<string, unknown> }[] = [];
    for (const item of list) {
      if (decodeIdentity(item.Labels)) continue;
      const definition = await describeUnlabeled(this.docker, item.Id, o);
      if (definition) out.push({ name: (item.Names[0] ?? item.Id).replace(/^\//, ''), definition });
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  async create(req: CreateRequest, o?: CallOptions): Promise<string> {
    const asDocker = createBody(req);
    const podman = (await this.engineKind(o)) === 'podman';
    const refusal = podman ? podmanRefusal(req.spec) : undefined;
    if (refusal)
      throw new SpcdError('ENGINE_UNSUPPORTED', refusal, { container: asDocker.name, engine: 'podman' });
    const body = podman ? forPodman(asDocker) : asDocker;
    const created = await withDeadline(`create ${body.name}`, DEADLINES.create, o?.signal, (abortSignal) =>
      this.docker.createContainer({ ...body, abortSignal } as unknown as Dockerode.ContainerCreateOptions),
    );
    this.opts.log.debug({ id: created.id, name: body.name }, 'container created');
    return created.id;
  }

  async start(id: string, o?: CallOptions): Promise<void> {
    this.invalidate(id);
    await this.tolerate304(`start ${id.slice(0, 12)}`, DEADLINES.start, o, (abortSignal) =>
      this.docker.getContainer(id).start({ abortSignal } as object),
    );
  }

  async stop(id: string, graceMs: number, o?: CallOptions): Promise<void> {
    this.invalidate(id);
    const t = Math.ceil(graceMs / 1000);
    await this.tolerate304(`stop ${id.slice(0, 12)}`, graceMs + DEADLINES.stopSlack, o, (abortSignal) =>
      this.docker.getContainer(id).stop({ t, abortSignal } as object),
    );
  }

  async kill(id: string, signal: string, o?: CallOptions): Promise<void> {
    this.invalidate(id);
    try {
      await withDeadline(`kill ${id.slice(0, 12)}`, DEADLINES.kill, o?.signal, (abortSignal) =>
        this.docker.getContainer(id).kill({ signal, abortSignal } as object),
      );
    } catch (err) {
      // 409: not running. Killing a stopped container is done already.
      if (err instanceof SpcdError && err.code === 'ENGINE_CONFLICT') return;
      throw err;
    }
  }

  async remove(id: string, o?: CallOptions): Promise<void> {
    this.invalidate(id);
    try {
      await withDeadline(`remove ${id.slice(0, 12)}`, DEADLINES.remove, o?.signal, (abortSignal) =>
        this.docker.getContainer(id).remove({ force: true, v: false, abortSignal } as object),
      );
    } catch (err) {
      // 404: gone already. 409 with force=true: a removal is already in progress.
      if (err instanceof SpcdError && (err.code === 'ENGINE_NOT_FOUND' || err.code === 'ENGINE_CONFLICT'))
        return;
      throw err;
    }
  }

  async rename(id: string, name: string, o?: CallOptions): Promise<void> {
    this.invalidate(id);
    await withDeadline(`rename ${id.slice(0, 12)} to ${name}`, DEADLINES.rename, o?.signal, (abortSignal) =>
      this.docker.getContainer(id).rename({ name, abortSignal } as object),
    );
  }

  async wait(id: string, timeoutMs: number, o?: CallOptions): Promise<number> {
    const res = await withDeadline(
      `wait ${id.slice(0, 12)}`,
      timeoutMs + DEADLINES.waitSlack,
      o?.signal,
      (abortSignal) =>
        this.docker.getContainer(id).wait({ abortSignal } as object) as Promise<{ StatusCode: number }>,
    );
    return res.StatusCode;
  }

  pull(req: PullRequest): Promise<ImageInfo> {
    return pullImage(this.docker, req, (ref) => this.imageInfo(ref));
  }

  async imageInfo(ref: string, o?: CallOptions): Promise<ImageInfo | undefined> {
    try {
      const info = (await withDeadline(
        `inspect image ${ref}`,
        DEADLINES.imageInspect,
        o?.signal,
        (abortSignal) => this.docker.getImage(ref).inspect({ abortSignal } as object),
      )) as unknown as {
        Id: string;
        RepoDigests?: string[];
        Config?: { Labels?: Record<string, string> | null };
      };
      return { id: info.Id, repoDigests: info.RepoDigests ?? [], labels: info.Config?.Labels ?? {} };
    } catch (err) {
      if (err instanceof SpcdError && err.code === 'ENGINE_NOT_FOUND') return undefined;
      throw err;
    }
  }

  volumeInfo(name: string, o?: CallOptions): Promise<VolumeInfo | undefined> {
    return inspectVolume(this.docker, name, o);
  }

  createVolume(req: VolumeCreateRequest, o?: CallOptions): Promise<VolumeInfo> {
    return createVolume(this.docker, req, o);
  }

  exec(containerId: string, req: ExecRequest): Promise<ExecResult> {
    return runExec(this.docker, containerId, req, this.opts.log);
  }

  subscribe(instance: string, onEvent: (e: EngineEvent) => void): EventSubscription {
    return subscribeEvents(this.docker, instance, (e) => {
      if (e.kind === 'container') this.invalidate(e.id);
      onEvent(e);
    });
  }

  logs(
    id: string,
    o: { tail: number; follow: boolean; onLine: (line: string) => void; onEnd: () => void },
  ): Promise<() => void> {
    return streamLogs(this.docker, id, o);
  }

  private engineKind(o?: CallOptions): Promise<EngineKind> {
    this.kind ??= this.info(o).then(
      (i) => i.kind,
      (err: unknown) => {
        this.kind = undefined;
        throw err;
      },
    );
    return this.kind;
  }

  /** 304 (already started / already stopped) is success for idempotent calls. */
  private async tolerate304(
    what: string,
    ms: number,
    o: CallOptions | undefined,
    fn: (signal: AbortSignal) => Promise<unknown>,
  ): Promise<void> {
    try {
      await withDeadline(what, ms, o?.signal, fn);
    } catch (err) {
      const cause = (err as { cause?: { statusCode?: number } }).cause;
      if (cause?.statusCode === 304) return;
      throw err instanceof SpcdError ? err : mapEngineError(err, what);
    }
  }
}
