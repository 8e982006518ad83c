/**
 * What spcd tells the world, as data: the API's /v1/events stream, the audit
 * log, Kubernetes Events and metrics all read these.
 */
export type SpcdEvent =
  | {
      readonly type: 'state';
      readonly at: number;
      readonly container: string;
      readonly from: string;
      readonly to: string;
      readonly reason?: string;
    }
  | {
      readonly type: 'health';
      readonly at: number;
      readonly container: string;
      readonly check?: string;
      readonly status: string;
      readonly output?: string;
    }
  | {
      /**
       * A dependency check (a service outside the container: RabbitMQ, the
       * database) reached its failure threshold (`down`), or passes again
       * after that (`up`). The container is not restarted for it.
       */
      readonly type: 'dependency';
      readonly at: number;
      readonly container: string;
      readonly check: string;
      readonly dependency: string;
      readonly status: 'down' | 'up';
      /** The last result's output. */
      readonly output?: string;
    }
  | {
      readonly type: 'upgrade-step';
      readonly at: number;
      readonly operationId: string;
      readonly container: string;
      readonly step: string;
      readonly generation: number;
      readonly outcome: 'begin' | 'done' | 'failed';
      readonly detail?: string;
    }
  | {
      readonly type: 'pull-progress';
      readonly at: number;
      readonly operationId: string;
      readonly image: string;
      readonly status: string;
      readonly current?: number;
      readonly total?: number;
    }
  | {
      readonly type: 'operation';
      readonly at: number;
      readonly operationId: string;
      readonly kind: string;
      readonly target: string;
      readonly phase: 'accepted' | 'running' | 'succeeded' | 'failed';
      readonly error?: { readonly code: string; readonly message: string };
      readonly result?: Readonly<Record<string, unknown>>;
    }
  | {
      /** The end of one upgrade transaction (an upgrade, a recreate for a changed definition, a rollback). */
      readonly type: 'upgrade';
      readonly at: number;
      readonly operationId: string;
      readonly container: string;
      readonly kind: 'upgrade' | 'recreate' | 'rollback';
      readonly outcome: UpgradeOutcome;
      /** The error's code when it did not succeed. */
      readonly code?: string;
    }
  | {
      /** The node's image policy refused an image before any pull or create (docs/explanation/security.md#image-policy). */
      readonly type: 'image-refused';
      readonly at: number;
      readonly operationId: string;
      readonly image: string;
      readonly reason: string;
    }
  | {
      /** spcd refused to stop, replace or remove a hypervisor because VMs run (docs/explanation/vm-survival.md). */
      readonly type: 'vm-safety-refused';
      readonly at: number;
      readonly container: string;
      readonly action: 'upgrade' | 'stop' | 'remove';
      readonly reason: string;
    }
  | {
      /**
       * The domain census of a hypervisor container after an upgrade,
       * recreate, rollback or restart (issue 12): `ok`, `mismatch`, or
       * `skipped` when the listing before the stop failed.
       */
      readonly type: 'census';
      readonly at: number;
      readonly operationId: string;
      readonly container: string;
      readonly action: string;
      readonly outcome: 'ok' | 'mismatch' | 'skipped';
      /** Domains listed before the stop and after the start (absent when that listing failed). */
      readonly before?: readonly string[];
      readonly after?: readonly string[];
      readonly missing: readonly string[];
      readonly added: readonly string[];
      /** qemu processes the host's /proc shows after the start (the VM probe). */
      readonly vmProcesses?: number;
      readonly detail: string;
    }
  | { readonly type: 'engine'; readonly at: number; readonly available: boolean; readonly reason?: string }
  | { readonly type: 'reload'; readonly at: number; readonly ok: boolean; readonly detail?: string };

/**
 * How an upgrade transaction ended: committed; rolled back to the old
 * generation (gate or step failed); refused before anything was touched (VM
 * safety, an unresolved journal entry); failed before anything was touched
 * (pull, digest, bootstrap, create); or its rollback failed too.
 */
export type UpgradeOutcome = 'succeeded' | 'rolled_back' | 'refused' | 'failed' | 'rollback_failed';

/** The outcome an upgrade error means, by its code. */
export function upgradeOutcomeOf(code: string): UpgradeOutcome {
  switch (code) {
    case 'UPGRADE_FAILED':
    case 'HEALTH_GATE_FAILED':
      return 'rolled_back';
    case 'ROLLBACK_FAILED':
      return 'rollback_failed';
    case 'VM_SAFETY_REFUSED':
    case 'RECOVERY_QUARANTINED':
    case 'CONFLICT':
      return 'refused';
    default:
      return 'failed';
  }
}

export type SpcdEventListener = (e: SpcdEvent) => void;

/** A tiny synchronous fan-out; listeners that throw are isolated from each other. */
export class EventBus {
  private readonly listeners = new Set<SpcdEventListener>();

  subscribe(listener: SpcdEventListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  publish(e: SpcdEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        // a broken subscriber must not stop the others or the publisher
      }
    }
  }

  get size(): number {
    return this.listeners.size;
  }
}
