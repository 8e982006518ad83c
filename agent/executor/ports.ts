import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { CheckSpec, ContainerSpec, NetworkMode, PidMode } from '../model/spec.js';
import type { ContainerEngine, ImageEngine, ExecEngine, LogEngine, RegistryAuth } from '../engine/types.js';
import type { StateStore } from '../state/store.js';
import type { Journal } from '../state/journal.js';
import type { Failpoint } from './failpoint.js';

/** The container instance the gate watches (the health room's WatchTarget, structurally). */
export interface GateTarget {
  readonly name: string;
  readonly containerId: string;
  readonly pid: number;
  readonly network: NetworkMode;
  readonly pidMode: PidMode;
  readonly startedAtMs: number;
  readonly checks: readonly CheckSpec[];
}

/** What the executor needs from the health room. */
export interface HealthGate {
  pause(name: string): void;
  resume(name: string): void;
  /** (Re)points the checks of `name` at this instance; the gate watches the new generation itself. */
  watch(target: GateTarget): void;
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
}

/** Counts VMs a hypervisor keeps running on this host (libvirt's qemu processes). */
export interface VmProbe {
  runningVms(): Promise<readonly { pid: number; name: string }[]>;
}

/**
 * Sees from the host when a stopping container has no process left, before
 * the engine has finished recording the stop (agent/daemon/exit-watch.ts).
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

export interface ExecutorDeps {
  readonly engine: ContainerEngine & ImageEngine & ExecEngine & LogEngine;
  readonly state: StateStore;
  readonly journal: Journal;
  readonly health: HealthGate;
  readonly preparer: Preparer;
  readonly vms: VmProbe;
  /** Lets an upgrade start a host-network container's successor as soon as the old one's processes are gone. */
  readonly exits?: ExitWatch;
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
}
