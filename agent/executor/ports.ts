import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { ContainerSpec } from '../model/spec.js';
import type {
  ContainerEngine,
  ImageEngine,
  ExecEngine,
  LogEngine,
  RegistryAuth,
  VolumeEngine,
} from '../engine/types.js';
import type { ConfigFileDigest, StateStore } from '../state/store.js';
import type { Journal } from '../state/journal.js';
import type { Failpoint } from './failpoint.js';
import type { ImagePolicy, SignatureRequirement } from '../model/image-policy.js';

/** What of a spec a health watch needs. */
export type WatchedSpec = Pick<ContainerSpec, 'name' | 'network' | 'pid' | 'healthchecks'>;

/** What the executor needs from the health room (the reconciler's HealthSync, which owns every watch). */
export interface HealthGate {
  pause(name: string): void;
  resume(name: string): void;
  /** (Re)points the checks of `spec` at this running instance; the gate watches the new generation itself. */
  watchInstance(spec: WatchedSpec, c: ObservedContainer): void;
  unwatch(name: string): void;
  /** deadlineMs is absolute, on the injected clock. */
  waitHealthy(name: string, containerId: string, deadlineMs: number, signal?: AbortSignal): Promise<void>;
}

/** Prepares what a new generation mounts: rendered config, health scripts. */
export interface Preparer {
  /** Binds and env to add at create, and the config hash it carries. */
  prepare(spec: ContainerSpec, generation: number): Promise<PreparedExtras>;
  /**
   * Points the container's config back at the version rendered with
   * `configHash` (the one a rolled-back-to generation runs). Idempotent;
   * false when that version is no longer kept. 'none' needs nothing.
   */
  restore(name: string, configHash: string): Promise<boolean>;
}

export interface PreparedExtras {
  readonly extraBinds: readonly { source: string; target: string; readOnly: boolean }[];
  readonly extraEnv: Readonly<Record<string, string>>;
  readonly configHash: string;
  /** Each rendered file's path and content digest, recorded with the generation; absent without config. */
  readonly configFiles?: readonly ConfigFileDigest[];
}

/** Counts VMs a hypervisor keeps running on this host (libvirt's qemu processes). */
export interface VmProbe {
  runningVms(): Promise<readonly { pid: number; name: string }[]>;
}

/**
 * Sees from the host when a stopping container has no process left, before
 * the engine has finished recording the stop (agent/host/exit-watch.ts).
 */
export interface ExitWatch {
  /**
   * Before the stop: undefined when the host cannot see this container's
   * processes (then only the engine can tell). gone() resolves true once none
   * is left, false when aborted or when it can no longer tell.
   */
  track(
    containerId: string,
    pid: number,
  ): Promise<{ gone(signal: AbortSignal): Promise<boolean> } | undefined>;
}

/**
 * Another supervisor of a container on this host: kolla-ansible's systemd
 * unit `kolla-<name>-container.service` (agent/host/kolla-units.ts).
 */
export interface UnitProbe {
  /** Why a unit could still stop or restart the container named `name`; undefined when none can. */
  supervisor(name: string): Promise<string | undefined>;
}

/** One image to verify: its repository and digest, and what the policy entry requires. */
export interface SignatureCheck {
  /** The registry host[:port] (docker.io for Docker Hub). */
  readonly registry: string;
  /** The path under the registry (kolla/nova-compute): the lookaside's sub-path. */
  readonly path: string;
  /** algorithm:hex, the manifest digest the image is named by. */
  readonly digest: string;
  readonly requirement: SignatureRequirement;
  /** Credentials for the registry, when the node has some. */
  readonly auth?: RegistryAuth;
}

export type SignatureVerdict =
  | { readonly verified: true; readonly fingerprint: string }
  | { readonly verified: false; readonly reason: string };

/**
 * Verifies an image's GPG "simple signing" signature before the engine is
 * asked for it (agent/host/image-signature.ts, with skopeo). Never throws for
 * a bad image: a refusal is a verdict with the reason.
 */
export interface ImageSignatureVerifier {
  verify(check: SignatureCheck, signal?: AbortSignal): Promise<SignatureVerdict>;
}

export interface ExecutorDeps {
  readonly engine: ContainerEngine & ImageEngine & ExecEngine & LogEngine & VolumeEngine;
  readonly state: StateStore;
  readonly journal: Journal;
  readonly health: HealthGate;
  readonly preparer: Preparer;
  readonly vms: VmProbe;
  /** Lets an upgrade start a host-network container's successor as soon as the old one's processes are gone. */
  readonly exits?: ExitWatch;
  /** An adoption is refused while another supervisor's unit could stop or restart the container. */
  readonly units?: UnitProbe;
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly failpoint: Failpoint;
  readonly instance: string;
  /** How long a new generation may take to become healthy. */
  readonly gateDeadlineMs: number;
  /** A container without checks must stay up this long to pass the gate. */
  readonly minReadyMs: number;
  readonly pullActivityTimeoutMs: number;
  readonly registryAuth: (image: string) => Promise<RegistryAuth | undefined>;
  /** Which images this node runs (--image-policy): checked before every pull and create (image.ts). */
  readonly imagePolicy: ImagePolicy;
  /** Verifies the signatures an entry of the policy requires; without it such an image is refused. */
  readonly imageSignatures?: ImageSignatureVerifier;
}
