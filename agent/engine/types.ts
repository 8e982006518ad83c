/**
 * The engine's narrow interfaces. Rooms other than engine/ import only these
 * types, never dockerode. Every method takes an optional AbortSignal and has a
 * deadline that fits its kind (see engine/deadlines.ts); passing the deadline
 * raises SpcdError ENGINE_TIMEOUT, an unreachable socket ENGINE_UNAVAILABLE.
 */
import type { UnlabeledContainer } from '../model/adoption.js';
import type { Identity } from '../model/labels.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';

export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** What identifies a container to create: the spec plus its identity labels. */
export interface CreateRequest {
  readonly spec: ContainerSpec;
  readonly identity: Identity;
  /** Docker name to create under; defaults to spec.name. */
  readonly name?: string;
  /** Extra binds added by spcd itself (health scripts, rendered config). */
  readonly extraBinds?: readonly { source: string; target: string; readOnly: boolean }[];
  /** Extra environment added by spcd itself (KOLLA_CONFIG_STRATEGY). */
  readonly extraEnv?: Readonly<Record<string, string>>;
  /** Overrides the spec's command (bootstrap tasks). */
  readonly command?: readonly string[];
  /** Labels added beside the identity (bootstrap tasks carry spcd.task). */
  readonly extraLabels?: Readonly<Record<string, string>>;
}

export interface ExecRequest {
  readonly argv: readonly string[];
  readonly timeoutMs: number;
  /** Output beyond this many bytes is dropped (the tail is kept). */
  readonly maxOutputBytes: number;
  readonly signal?: AbortSignal;
}

export interface ExecResult {
  /** null when the exec was cut off at its timeout. */
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** Combined stdout+stderr, the last maxOutputBytes of it. */
  readonly output: string;
  readonly durationMs: number;
}

export interface PullProgress {
  readonly image: string;
  readonly status: string;
  readonly layer?: string;
  readonly current?: number;
  readonly total?: number;
}

export interface RegistryAuth {
  readonly username: string;
  readonly password: string;
  readonly serveraddress: string;
}

export interface PullRequest {
  readonly image: string;
  readonly auth?: RegistryAuth;
  /** The pull fails when no progress arrives for this long. */
  readonly activityTimeoutMs: number;
  readonly onProgress?: (p: PullProgress) => void;
  readonly signal?: AbortSignal;
}

export interface ImageInfo {
  readonly id: string;
  /** "repo@sha256:..." entries; empty for locally built images. */
  readonly repoDigests: readonly string[];
  /** Labels set on the image (e.g. org.opencontainers.image.version). */
  readonly labels: Readonly<Record<string, string>>;
}

export type EngineEvent =
  | {
      readonly kind: 'container';
      readonly action: 'start' | 'die' | 'stop' | 'kill' | 'destroy' | 'create' | 'oom' | 'health_status';
      readonly id: string;
      readonly name: string;
      readonly labels: Readonly<Record<string, string>>;
      readonly exitCode?: number;
      readonly timeNano: number;
    }
  /** The stream ended or broke; this is never "a container exited". */
  | { readonly kind: 'stream-lost'; readonly error?: Error };

export interface EventSubscription {
  close(): void;
}

/** A one-shot bootstrap task container (labelled spcd.task), as the engine lists it. */
export interface TaskContainer {
  readonly id: string;
  readonly name: string;
  readonly identity: Identity;
  readonly task: string;
  readonly running: boolean;
}

/** Containers: list, inspect, create, lifecycle. */
export interface ContainerEngine {
  ping(opts?: CallOptions): Promise<void>;
  /** Every container carrying a complete spcd identity for this instance. */
  listManaged(instance: string, opts?: CallOptions): Promise<ObservedContainer[]>;
  /** Every bootstrap task container of this instance (listManaged leaves them out). */
  listTasks(instance: string, opts?: CallOptions): Promise<TaskContainer[]>;
  inspect(id: string, opts?: CallOptions): Promise<ObservedContainer | undefined>;
  /**
   * The container under `name` when it carries no spcd identity (one spcd may
   * adopt), with its differences from `expected`; undefined otherwise.
   */
  inspectUnlabeled(
    name: string,
    expected: CreateRequest | undefined,
    opts?: CallOptions,
  ): Promise<UnlabeledContainer | undefined>;
  /** Every running container without spcd labels, each as a container-set entry (YAML keys) that reproduces it. */
  describeUnlabeled(opts?: CallOptions): Promise<{ name: string; definition: Record<string, unknown> }[]>;
  create(req: CreateRequest, opts?: CallOptions): Promise<string>;
  start(id: string, opts?: CallOptions): Promise<void>;
  /** Sends the stop signal, waits graceMs, then kills. Idempotent on stopped containers. */
  stop(id: string, graceMs: number, opts?: CallOptions): Promise<void>;
  kill(id: string, signal: string, opts?: CallOptions): Promise<void>;
  remove(id: string, opts?: CallOptions): Promise<void>;
  rename(id: string, name: string, opts?: CallOptions): Promise<void>;
  /** Waits for the container to exit; resolves with its exit code. */
  wait(id: string, timeoutMs: number, opts?: CallOptions): Promise<number>;
}

export interface ImageEngine {
  pull(req: PullRequest): Promise<ImageInfo>;
  imageInfo(ref: string, opts?: CallOptions): Promise<ImageInfo | undefined>;
}

export interface ExecEngine {
  exec(containerId: string, req: ExecRequest): Promise<ExecResult>;
}

export interface EventEngine {
  subscribe(instance: string, onEvent: (e: EngineEvent) => void): EventSubscription;
}

export interface LogEngine {
  /** Streams a container's logs; the returned function stops the stream. */
  logs(
    id: string,
    opts: { tail: number; follow: boolean; onLine: (line: string) => void; onEnd: () => void },
  ): Promise<() => void>;
}

/** A Docker named volume, as the engine shows it. */
export interface VolumeInfo {
  readonly name: string;
  readonly driver: string;
  readonly labels: Readonly<Record<string, string>>;
}

export interface VolumeCreateRequest {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** Named volumes: looked at and created, never removed (spcd removes no volume). */
export interface VolumeEngine {
  /** undefined when the engine has no volume of that name. */
  volumeInfo(name: string, opts?: CallOptions): Promise<VolumeInfo | undefined>;
  /**
   * Creates a volume of the local driver with these labels, and answers what
   * the engine then holds. A volume of that name made meanwhile is answered as
   * it is (the engine's own rule): its labels are never changed.
   */
  createVolume(req: VolumeCreateRequest, opts?: CallOptions): Promise<VolumeInfo>;
}

export type Engine = ContainerEngine & ImageEngine & ExecEngine & EventEngine & LogEngine & VolumeEngine;
