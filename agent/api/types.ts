/**
 * The API room's view of the daemon. The API never touches the engine: it
 * reads through StatusView and acts through Actions, both implemented by the
 * daemon (agent/daemon/) and faked in API tests.
 */
import type { SpcdEvent } from '../model/events.js';
import type { OperationRef } from '../model/operation.js';

export type ContainerState =
  | 'running'
  | 'starting'
  | 'stopped' // stopped by an operator; it stays stopped until their start
  | 'exited' // exited on its own; a restart is pending (backoff)
  | 'crash-looping' // restarted too often in the window; still retried, slowly
  | 'failed' // spcd cannot make progress (e.g. bootstrap failed, image missing)
  | 'missing' // defined, not yet created
  | 'upgrading' // an operator's upgrade, rollback or set upgrade has it locked
  | 'quarantined' // its journal entry could not be finished or undone; left alone until an operator clears it
  | 'unknown'; // engine unavailable

export type HealthState = 'healthy' | 'unhealthy' | 'starting' | 'unknown' | 'none';

export interface ErrorView {
  readonly code: string;
  readonly message: string;
  readonly at: string; // ISO time
}

/** The last domain census of a hypervisor container (issue 12; docs/explanation/vm-survival.md). */
export interface CensusView {
  readonly outcome: 'ok' | 'mismatch' | 'skipped';
  /** upgrade, recreate, rollback or restart. */
  readonly action: string;
  readonly operationId: string;
  readonly at: string; // ISO time
  /** Domains listed before the stop and after the start; null when that listing failed. */
  readonly before: number | null;
  readonly after: number | null;
  readonly missing: readonly string[];
  readonly added: readonly string[];
  /** qemu processes the host's /proc showed after the start. */
  readonly vmProcesses: number | null;
  readonly detail: string;
  /** Mismatches since spcd started. */
  readonly mismatches: number;
}

export interface ContainerStatus {
  readonly name: string;
  readonly set: string;
  readonly generation: number; // 0 when never created
  readonly image: string;
  readonly imageDigest: string | null;
  readonly containerId: string | null;
  readonly state: ContainerState;
  /** Of its own (liveness) checks; `none` when it has none. Dependency checks are in `dependencies`. */
  readonly health: HealthState;
  /** One per dependency check, when it has any: a service outside the container, up or down. */
  readonly dependencies?: readonly DependencyView[];
  readonly dockerHealth: string | null; // the image's own HEALTHCHECK status
  readonly restartCount: number;
  readonly startedAt: string | null;
  readonly lastError: ErrorView | null;
  readonly specHash: string;
  readonly configHash: string;
  readonly operation: string | null; // id of the operation that has it locked
  /** Why spcd leaves it as it is: its labels were written by a newer spcd (a hash scheme this one does not know). */
  readonly untouched?: string;
  /** The last domain census (hypervisor containers with `census:`, after their first stop since spcd started). */
  readonly census?: CensusView;
}

/**
 * A dependency check's view of its dependency: `up` while it passes, `down`
 * from its failure threshold until it passes again, `unknown` before its first
 * verdict (and while the container does not run).
 */
export interface DependencyView {
  readonly check: string;
  readonly dependency: string;
  readonly status: 'up' | 'down' | 'unknown';
}

export interface SetStatus {
  readonly name: string;
  readonly path: string;
  readonly description: string;
  readonly containers: readonly ContainerStatus[];
  readonly sets: readonly SetStatus[];
}

export interface DefinitionProblem {
  readonly file: string;
  readonly line: number;
  readonly path: string;
  readonly message: string;
}

export type DefinitionsStatus =
  | { readonly loaded: true }
  | {
      readonly loaded: false;
      readonly holding: true;
      readonly error: {
        readonly code: string;
        readonly message: string;
        readonly problems?: readonly DefinitionProblem[];
      };
    };

export interface StatusDocument {
  readonly version: string;
  /** The git commit spcd was built from and the build date ("unknown" when run from the sources). */
  readonly build?: { readonly commit: string; readonly date: string };
  readonly instance: string;
  readonly host: Readonly<Record<string, unknown>>;
  readonly engine: { readonly available: boolean; readonly version?: string; readonly reason?: string };
  readonly preflight?: Readonly<Record<string, unknown>>;
  /**
   * Whether the definitions on disk are in force. When they could not be
   * read (at start or since), spcd keeps what runs: the containers are under
   * `retained`, restarted when they exit, and nothing is created, replaced
   * or removed until a reload reads the definitions cleanly.
   */
  readonly definitions?: DefinitionsStatus;
  readonly sets: readonly SetStatus[];
  /**
   * Containers of this instance that still exist though no definition names
   * them: a hypervisor kept while VMs run, a removal still pending, or every
   * container while the definitions are not loaded.
   */
  readonly retained?: readonly ContainerStatus[];
  /** Present when state.json was unusable at start-up and was set aside (docs/how-to/recover-from-a-failed-upgrade.md). */
  readonly stateRecovery?: StateRecoveryView;
}

export interface StateRecoveryView {
  readonly at: string;
  /** Why the file could not be used (the file and the field or parse error). */
  readonly reason: string;
  /** Where the unusable file was kept; null when it could not be moved. */
  readonly movedTo: string | null;
  /** Containers whose generation numbers and last known good came from container labels. */
  readonly rebuilt: readonly string[];
  readonly rebuildError?: string;
}

export interface HealthResultView {
  readonly at: string;
  readonly ok: boolean;
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly durationMs: number;
  readonly output: string;
}

export interface CheckHealthView {
  readonly name: string;
  readonly status: HealthState;
  /** Set for a dependency check: it takes no part in the container's status. */
  readonly dependency?: string;
  readonly consecutiveFailures: number;
  readonly consecutiveSuccesses: number;
  readonly history: readonly HealthResultView[];
}

export interface ContainerHealthView {
  readonly name: string;
  readonly status: HealthState;
  readonly dockerHealth: string | null;
  readonly checks: readonly CheckHealthView[];
}

export interface GenerationView {
  readonly generation: number;
  readonly image: string;
  readonly imageDigest: string | null;
  readonly specHash: string;
  readonly configHash: string;
  readonly createdAt: string;
  readonly outcome: 'current' | 'committed' | 'rolled-back' | 'failed' | 'superseded' | 'in-progress';
  readonly reason?: string;
  /** The generation whose spec this one re-applied (rollbacks). */
  readonly from?: number;
}

/** One config file that differs between two generations. */
export interface ConfigFileChangeView {
  /** Relative to the container's config directory ("nova.conf", "config.json"). */
  readonly path: string;
  readonly change: 'added' | 'removed' | 'modified';
  /** sha256 of the content in each generation; null where the file is absent. */
  readonly fromSha256: string | null;
  readonly toSha256: string | null;
  /**
   * Unified diff of the rendered content, secrets masked, present only when
   * spcd still keeps both versions on disk (the current and previous config).
   */
  readonly diff?: string;
}

/** GET /v1/containers/{name}/generations/diff?from=A&to=B: what changed from generation A to B. */
export interface GenerationDiffView {
  readonly name: string;
  readonly from: GenerationView;
  readonly to: GenerationView;
  /** Present when the image reference or the digest differ. */
  readonly image?: { readonly from: string; readonly to: string };
  readonly imageDigest?: { readonly from: string | null; readonly to: string | null };
  /**
   * Spec fields that differ (paths such as "environment.DEBUG" or
   * "binds[target=/etc/x].readOnly"; absent from/to: the field is new/gone).
   * Values that hold a secret are shown as "******".
   */
  readonly spec: readonly { readonly path: string; readonly from?: unknown; readonly to?: unknown }[];
  readonly config: {
    /** Whether the config hashes differ. */
    readonly changed: boolean;
    /**
     * False when a generation was recorded without its file list (an older
     * spcd) and its version is no longer kept: `files` then lists only what
     * is known, and the config hash says whether anything changed.
     */
    readonly filesKnown: boolean;
    readonly files: readonly ConfigFileChangeView[];
  };
}

export interface PlanItem {
  readonly container: string;
  readonly set: string;
  /** adopt: a container without spcd labels that spcd adopts on the operator's word (blocked: the reason says why not). */
  readonly action: 'create' | 'recreate' | 'restart' | 'remove' | 'start' | 'adopt' | 'none';
  readonly reason: string;
  readonly fileDiffs?: readonly { readonly file: string; readonly diff: string }[];
}

export interface PlanView {
  readonly items: readonly PlanItem[];
  readonly problems: readonly string[];
}

export type { OperationRef };

export interface LogStreamOptions {
  readonly tail: number;
  readonly follow: boolean;
  readonly onLine: (line: string) => void;
  readonly onEnd: () => void;
}

export interface StatusView {
  status(): Promise<StatusDocument>;
  /**
   * Optional (added by the API helper): a number that changes whenever
   * status() would answer differently. When present, the API serializes
   * GET /v1/status once per revision and answers ETag / 304.
   */
  revision?(): number;
  sets(): readonly SetStatus[];
  set(path: string): SetStatus | undefined;
  container(name: string): ContainerStatus | undefined;
  health(name: string): ContainerHealthView | undefined;
  generations(name: string): readonly GenerationView[] | undefined;
  /**
   * What changed from generation `from` to `to` of a container; undefined for
   * an unknown container, NOT_FOUND (thrown) for a generation no longer kept.
   * Optional so older fakes need not implement it (the route answers 404).
   */
  generationDiff?(name: string, from: number, to: number): Promise<GenerationDiffView | undefined>;
  plan(): Promise<PlanView>;
  /**
   * Containers of this instance no definition names (StatusDocument.retained),
   * so the per-container metrics keep them while definitions are not loaded.
   */
  retained?(): readonly ContainerStatus[];
  subscribe(listener: (e: SpcdEvent) => void): () => void;
  /** Throws SpcdError NOT_FOUND for an unknown container. Returns a stop function. */
  logs(name: string, opts: LogStreamOptions): Promise<() => void>;
}

export interface Actions {
  /** Each throws SpcdError synchronously-ish (rejects) on NOT_FOUND, CONFLICT or GENERATION_MISMATCH. */
  restart(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef>;
  stop(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef>;
  start(name: string, opts: { expectedGeneration?: number }): Promise<OperationRef>;
  upgrade(name: string, opts: { image: string; expectedGeneration?: number }): Promise<OperationRef>;
  rollback(name: string, opts: { toGeneration?: number; force?: boolean }): Promise<OperationRef>;
  upgradeSet(path: string, opts: { images?: Readonly<Record<string, string>> }): Promise<OperationRef>;
  reload(): Promise<OperationRef>;
  /**
   * The operator's word: adopt the container without spcd labels that runs
   * under this name (no stop, no restart). Optional so older fakes need not
   * implement it (the route answers 404).
   */
  adopt?(name: string): Promise<OperationRef>;
  /** Forget an adoption: the container runs on as it is, no longer managed. */
  release?(name: string): Promise<OperationRef>;
  /** Every running container without spcd labels, as container-set entries that reproduce it. */
  adoptScan?(): Promise<AdoptScan>;
}

export interface AdoptScan {
  readonly containers: readonly {
    readonly name: string;
    readonly definition: Readonly<Record<string, unknown>>;
  }[];
}
