/**
 * A RolloutBackend in memory, shared by in-process nodes: what a real backend
 * must guarantee (compare-and-swap on the ledger, at most N slot holders, one
 * phase per node), with nothing else. For the runner's unit tests.
 */
import { SpcdError } from '../../agent/errors.js';
import type { DesiredDocument, RolloutBackend } from '../../agent/rollout/backend.js';
import type { Ledger, PhaseReport } from '../../agent/rollout/decide.js';

export class MemoryCluster {
  ledger: Ledger | undefined;
  ledgerVersion = 0;
  readonly phases = new Map<string, PhaseReport>();
  readonly history: PhaseReport[] = [];
  private readonly listeners = new Set<(d: DesiredDocument | undefined) => void>();
  private desired: DesiredDocument | undefined;
  private docVersion = 0;
  inSlot = 0;
  maxInSlot = 0;
  slotTakes = 0;
  private readonly waiters: (() => void)[] = [];

  /** A new desired document (`source` defaults to 'memory cluster'). */
  publish(d: (Omit<DesiredDocument, 'version' | 'source'> & { source?: string }) | undefined): void {
    this.desired = d && { source: 'memory cluster', ...d, version: String(++this.docVersion) };
    for (const l of this.listeners) l(this.desired);
  }

  backend(node: string): RolloutBackend {
    return {
      followDesired: async (onChange) => {
        this.listeners.add(onChange);
        if (this.desired) onChange(this.desired);
        return { stop: () => this.listeners.delete(onChange) };
      },
      readLedger: async () => ({
        ledger: this.ledger && structuredClone(this.ledger),
        version: this.ledger ? String(this.ledgerVersion) : undefined,
      }),
      writeLedger: async (ledger, version) => {
        const now = this.ledger ? String(this.ledgerVersion) : undefined;
        if (version !== now) return false;
        this.ledger = structuredClone(ledger);
        this.ledgerVersion++;
        return true;
      },
      readPhase: async () => this.phases.get(node),
      writePhase: async (r) => {
        this.phases.set(node, r);
        this.history.push(r);
      },
      listPhases: async () => [...this.phases.values()],
      withSlot: async <T>(n: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T> => {
        while (this.inSlot >= n) {
          if (signal.aborted) throw new SpcdError('SHUTTING_DOWN', 'aborted');
          await new Promise<void>((resolve) => {
            const onAbort = (): void => resolve();
            signal.addEventListener('abort', onAbort, { once: true });
            this.waiters.push(() => {
              signal.removeEventListener('abort', onAbort);
              resolve();
            });
          });
        }
        this.inSlot++;
        this.slotTakes++;
        this.maxInSlot = Math.max(this.maxInSlot, this.inSlot);
        try {
          return await fn();
        } finally {
          this.inSlot--;
          for (const w of this.waiters.splice(0)) w();
        }
      },
    };
  }

  /** The nodes that ever reported `phase`. */
  reached(phase: PhaseReport['phase']): string[] {
    return [...new Set(this.history.filter((h) => h.phase === phase).map((h) => h.node))].sort();
  }
}

/** Lets every pending promise callback run (the fake clock does not move). */
export async function settle(rounds = 50): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((r) => setImmediate(r));
}
