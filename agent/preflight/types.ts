/** Host preflight: what a compute host needs before spcd starts its sets. */

export type Severity = 'block' | 'warn';

export interface PreflightCheck {
  readonly name: string;
  readonly ok: boolean;
  /** What a failure means: `block` stops the first start, `warn` is reported only. */
  readonly severity: Severity;
  /** What was seen; for a failure, why it failed and what to do. */
  readonly detail: string;
}

export interface PreflightReport {
  readonly at: string;
  /** False when any check with severity `block` failed. */
  readonly ok: boolean;
  /** Names of the failed blocking checks. */
  readonly blocking: readonly string[];
  readonly checks: readonly PreflightCheck[];
  readonly host: { readonly kernel?: string; readonly distro?: string; readonly hostname?: string };
}

export interface DockerInfoLite {
  /** Docker, or Podman's Docker-compatible service. */
  readonly kind: 'docker' | 'podman';
  readonly version: string;
  readonly liveRestore: boolean;
  readonly cgroupVersion: string;
  readonly cgroupDriver: string;
  /** DockerRootDir, default /var/lib/docker. */
  readonly rootDir?: string;
}

/** What preflight needs of the engine (agent/engine/ provides it): its facts; a call that fails means it does not answer. */
export interface EngineFacts {
  info(): Promise<DockerInfoLite>;
}

export interface PreflightDeps {
  /** Default /proc. */
  readonly procRoot?: string;
  /** Default /sys. */
  readonly sysRoot?: string;
  /** Default /dev. */
  readonly devRoot?: string;
  /** Default /run (for systemd's timesync marker). */
  readonly runRoot?: string;
  readonly engine: EngineFacts;
  /** The engine the operator named (--engine); undefined: whichever answers. */
  readonly expectedEngine?: 'docker' | 'podman';
  readonly stateDir: string;
  /** ms since epoch. */
  readonly now: () => number;
  /** Whether a defined set runs a hypervisor (nova_libvirt): makes a host libvirtd blocking. Default true. */
  readonly hypervisorSet?: boolean;
  /** Host facts; default from systeminformation. */
  readonly hostInfo?: () => Promise<PreflightReport['host']>;
  /** Free bytes under a path; default node:fs statfs. */
  readonly freeBytes?: (path: string) => Promise<number | undefined>;
  /** The image policy's prefixes whose images must be signed; default none. */
  readonly signedPrefixes?: readonly string[];
  /** Whether a command is on PATH; default a search of PATH. */
  readonly onPath?: (bin: string) => Promise<boolean>;
}
