/**
 * RolloutRunner: one node's part in a fleet rollout, over any RolloutBackend.
 * pulling -> (held | paused)* -> queued -> upgrading -> [soaking] -> done | failed | rolled-back.
 * Images are pulled before the node queues (a pull failure is its own phase,
 * retried with backoff, and keeps the node out of the queue); a slot is held
 * only for the swap; every start is decided by decide.ts, once before queueing
 * and again holding the slot, with the ledger as it is then.
 */
import { createHash } from 'node:crypto';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { DesiredDocument, RolloutBackend } from './backend.js';
import {
  admitCanary,
  decide,
  ledgerFor,
  withCanary,
  withFailure,
  type Ledger,
  type Phase,
  type PhaseReport,
} from './decide.js';
import { PhaseReporter } from './phase-reporter.js';
import { parseRollout, type RolloutSpec } from './spec.js';

export interface RolloutActions {
  /** Whether the target changes anything on this node (else it is done at once, taking no slot). */
  pending(d: DesiredDocument): boolean;
  /** Pulls the images this node would change to; rejects when a pull fails. */
  prePull(images: Readonly<Record<string, string>>): Promise<void>;
  /** Applies globals then images, health-gated; rejects UPGRADE_FAILED when rolled back. */
  apply(d: DesiredDocument): Promise<void>;
  /** This node's health now (a canary's soak watches it). */
  health(): 'healthy' | 'unhealthy' | 'unknown';
}

export interface RolloutRunnerOptions {
  readonly node: string;
  readonly backend: RolloutBackend;
  readonly actions: RolloutActions;
  readonly clock: Clock;
  readonly log: Logger;
  /** N when the rollout object names none (--fleet-slots). */
  readonly defaultMaxConcurrent: number;
  /** Pre-pull retry: first delay, doubled per failure up to the cap. Default 10 s, 5 min. */
  readonly pullRetryMs?: number;
  readonly pullRetryCapMs?: number;
  /** A held node reads the ledger again this often (±50%). Default 15 s. */
  readonly recheckMs?: number;
  /** A soaking canary looks at its health this often. Default 5 s. */
  readonly soakCheckMs?: number;
  /**
   * A phase report is written this long after it was made, newest wins: a
   * phase shorter than this (a pull of images already present, a swap that
   * takes no time) costs the cluster no write. Default 300 ms.
   */
  readonly phaseSettleMs?: number;
  readonly random?: () => number;
}

/** The default rollout id: a hash of the target, so the same target is the same rollout. */
export function targetId(d: Pick<DesiredDocument, 'images' | 'globals'>): string {
  const h = createHash('sha256')
    .update(JSON.stringify([d.images, d.globals]))
    .digest('hex');
  return `t-${h.slice(0, 12)}`;
}

const FINAL: readonly Phase[] = ['done', 'failed', 'rolled-back'];

interface Run {
  readonly doc: DesiredDocument;
  /** The hash of its images and globals: the same id may carry a new target. */
  readonly target: string;
  spec: RolloutSpec;
  readonly abort: AbortController;
  done: Promise<void>;
  wake?: () => void;
}

class Superseded extends Error {}

export class RolloutRunner {
  private run: Run | undefined;
  private follower: { stop(): void } | undefined;
  private readonly phases: PhaseReporter;
  private stopped = false;
  private readonly random: () => number;

  constructor(private readonly o: RolloutRunnerOptions) {
    this.random = o.random ?? Math.random;
    this.phases = new PhaseReporter({
      backend: o.backend,
      clock: o.clock,
      log: o.log,
      settleMs: o.phaseSettleMs ?? 300,
      retryDelay: () => this.recheckDelay(),
    });
  }

  /** Reads this node's last report, then follows the desired document. */
  async start(): Promise<void> {
    this.phases.last = await this.o.backend.readPhase().catch(() => undefined);
    this.follower = await this.o.backend.followDesired(
      (d) => this.onDesired(d),
      (err) => this.o.log.warn({ code: err.code, err: err.message }, 'desired document invalid; ignored'),
    );
  }

  /** Stops following; a run waiting or queued ends, an upgrade under way finishes first. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.phases.stop();
    this.follower?.stop();
    this.run?.abort.abort();
    await this.run?.done;
  }

  /** The run's promise, for tests and shutdown. */
  get current(): Promise<void> {
    return this.run?.done ?? Promise.resolve();
  }

  /** A new desired document: the same rollout takes the new rules at once; another target supersedes. */
  onDesired(d: DesiredDocument | undefined): void {
    if (this.stopped) return;
    // Gone: the cluster layer empties (a change like any other, under a slot).
    const doc: DesiredDocument = d ?? {
      version: 'absent',
      images: {},
      globals: {},
      rollout: undefined,
      source: 'absent',
    };
    let spec: RolloutSpec;
    try {
      spec = parseRollout(
        doc.rollout,
        { maxConcurrent: this.o.defaultMaxConcurrent, id: targetId(doc) },
        doc.source,
      );
    } catch (err) {
      const e = err as SpcdError;
      this.o.log.warn(
        { code: e.code, err: e.message },
        'rollout object invalid; the desired document is ignored',
      );
      return;
    }
    const prev = this.run;
    const target = targetId(doc);
    if (prev && prev.spec.id === spec.id && prev.target === target) {
      prev.spec = spec;
      prev.wake?.();
      return;
    }
    // finished before a restart (or before this re-delivery)
    const last = this.phases.last;
    if (last?.rollout === spec.id && last.target === target && FINAL.includes(last.phase)) return;
    prev?.abort.abort();
    const run: Run = { doc, target, spec, abort: new AbortController(), done: Promise.resolve() };
    run.done = (prev?.done ?? Promise.resolve())
      .then(() => this.execute(run))
      .finally(() => this.flushPhases())
      .catch((err: unknown) => {
        if (err instanceof Superseded || isSpcdError(err, 'SHUTTING_DOWN')) return;
        this.o.log.warn({ rollout: spec.id, err: (err as Error).message }, 'fleet upgrade did not complete');
      });
    this.run = run;
  }

  /** Publishes this node's phase (phase-reporter.ts: settled, newest wins, never waited for). */
  private phase(run: Run, phase: Phase, extra: Partial<PhaseReport> = {}): void {
    this.phases.report({
      node: this.o.node,
      rollout: run.spec.id,
      target: run.target,
      phase,
      since: this.o.clock.now(),
      ...extra,
    });
  }

  /** Resolves once the newest phase is written (or its write failed). */
  flushPhases(): Promise<void> {
    return this.phases.flush();
  }

  /** Waits ms, or until the run's rules change; rejects when the run is superseded or stopped. */
  private pause(run: Run, ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (run.abort.signal.aborted) return reject(new Superseded());
      const done = (): void => {
        cancel();
        run.abort.signal.removeEventListener('abort', onAbort);
        run.wake = undefined;
        resolve();
      };
      const onAbort = (): void => {
        cancel();
        run.wake = undefined;
        reject(new Superseded());
      };
      const cancel = this.o.clock.setTimer(Math.max(1, ms), done);
      run.wake = done;
      run.abort.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async updateLedger(run: Run, f: (l: Ledger) => Ledger | undefined): Promise<Ledger | undefined> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const { ledger, version } = await this.o.backend.readLedger();
      const next = f(ledgerFor(run.spec.id, ledger));
      if (!next) return undefined;
      if (await this.o.backend.writeLedger(next, version)) return next;
    }
    throw new SpcdError('LEASE_CONFLICT', 'the rollout ledger kept changing under this node');
  }

  /** Records what must not be lost (a failure, a canary's result), retrying until the backend answers. */
  private async record(run: Run, f: (l: Ledger) => Ledger): Promise<void> {
    for (;;) {
      try {
        await this.updateLedger(run, f);
        return;
      } catch (err) {
        if (this.stopped) throw err;
        this.o.log.warn(
          { code: isSpcdError(err) ? err.code : 'INTERNAL' },
          'rollout ledger write failed; retrying',
        );
        await new Promise<void>((r) => this.o.clock.setTimer(this.recheckDelay(), r));
      }
    }
  }

  private recheckDelay(): number {
    return Math.max(1, Math.round((this.o.recheckMs ?? 15_000) * (0.5 + this.random())));
  }

  private async execute(run: Run): Promise<void> {
    const { log, node } = this.o;
    if (!this.o.actions.pending(run.doc)) {
      // A canary that restarted after its upgrade still owes the fleet its soak.
      if (await this.owesSoak(run)) return this.soak(run);
      this.phase(run, 'done', { reason: 'up-to-date' });
      return;
    }
    await this.pull(run);
    for (;;) {
      let gate;
      try {
        gate = await this.gate(run);
      } catch (err) {
        if (err instanceof Superseded) throw err;
        log.warn(
          { code: isSpcdError(err) ? err.code : 'INTERNAL' },
          'rollout state unreadable; no upgrade starts',
        );
        await this.pause(run, this.recheckDelay());
        continue;
      }
      if (gate.kind === 'hold') {
        this.phase(run, gate.phase, { reason: gate.reason });
        const untilRecheck = gate.recheckAt !== undefined ? gate.recheckAt - this.o.clock.now() : Infinity;
        await this.pause(run, Math.min(untilRecheck, this.recheckDelay()));
        continue;
      }
      this.phase(run, 'queued');
      const outcome = await this.o.backend
        .withSlot(run.spec.maxConcurrent, run.abort.signal, async () => {
          // Holding the slot: decide again with the ledger as it is now.
          if (run.abort.signal.aborted) return { kind: 'again' as const };
          const now = await this.gate(run);
          if (now.kind === 'hold') return { kind: 'again' as const };
          if (now.canary && !(await this.updateLedger(run, (l) => admitCanary(run.spec, l, node))))
            return { kind: 'again' as const };
          this.phase(run, 'upgrading', now.canary ? { canary: true } : {});
          try {
            await this.o.actions.apply(run.doc);
            return { kind: 'ok' as const, canary: now.canary };
          } catch (err) {
            // Recorded before the slot is released: the next node to take it sees this failure.
            await this.record(run, (l) =>
              now.canary ? withCanary(l, node, 'failed') : withFailure(l, node),
            );
            return { kind: 'failed' as const, canary: now.canary, err };
          }
        })
        .catch((err: unknown) => {
          if (err instanceof Superseded || run.abort.signal.aborted) throw err;
          // The backend did not answer (taking a slot, reading the ledger): no upgrade started; try again.
          log.warn({ code: isSpcdError(err) ? err.code : 'INTERNAL' }, 'no slot taken; trying again later');
          return { kind: 'unavailable' as const };
        });
      if (outcome.kind === 'unavailable') {
        await this.pause(run, this.recheckDelay());
        continue;
      }
      if (outcome.kind === 'again') continue;
      if (outcome.kind === 'failed') {
        const rolledBack = isSpcdError(outcome.err, 'UPGRADE_FAILED');
        const code = isSpcdError(outcome.err) ? outcome.err.code : 'INTERNAL';
        this.phase(run, rolledBack ? 'rolled-back' : 'failed', {
          reason: code,
          message: (outcome.err as Error).message,
          ...(outcome.canary ? { canary: true } : {}),
        });
        throw outcome.err;
      }
      if (outcome.canary) await this.soak(run);
      else this.phase(run, 'done');
      return;
    }
  }

  /** Whether the ledger has this node as a canary that has not finished (a restart mid-upgrade or mid-soak). */
  private async owesSoak(run: Run): Promise<boolean> {
    if (!run.spec.canary) return false;
    for (;;) {
      try {
        const mine = ledgerFor(run.spec.id, (await this.o.backend.readLedger()).ledger).canaries[this.o.node];
        return mine === 'upgrading' || mine === 'soaking';
      } catch (err) {
        this.o.log.warn(
          { code: isSpcdError(err) ? err.code : 'INTERNAL' },
          'rollout ledger unreadable; retrying',
        );
        await this.pause(run, this.recheckDelay());
      }
    }
  }

  /** Phase pulling; a failure is phase pull-failed, retried with backoff; the node never queues meanwhile. */
  private async pull(run: Run): Promise<void> {
    const base = this.o.pullRetryMs ?? 10_000;
    const cap = this.o.pullRetryCapMs ?? 300_000;
    for (let failures = 0; ;) {
      // a node retrying stays pull-failed (with the last error) until a pull works
      if (failures === 0) this.phase(run, 'pulling');
      try {
        await this.o.actions.prePull(run.doc.images);
        return;
      } catch (err) {
        failures++;
        const code = isSpcdError(err) ? err.code : 'INTERNAL';
        const retryInMs = Math.min(cap, base * 2 ** Math.min(20, failures - 1));
        this.o.log.warn(
          { phase: 'pull-failed', code, err: (err as Error).message, retryInMs },
          'fleet upgrade: pre-pull failed; not queued, retrying',
        );
        this.phase(run, 'pull-failed', { reason: code, message: (err as Error).message });
        await this.pause(run, retryInMs);
      }
    }
  }

  private async gate(run: Run): Promise<ReturnType<typeof decide>> {
    // Without a canary or a budget nothing in the ledger can hold a node: no read.
    const needsLedger = run.spec.canary !== undefined || run.spec.failureBudget !== undefined;
    const raw = needsLedger ? (await this.o.backend.readLedger()).ledger : undefined;
    const ledger = ledgerFor(run.spec.id, raw);
    let fleet: number | undefined;
    if (run.spec.failureBudget?.maxFailedPercent !== undefined && ledger.failed.length > 0)
      fleet = (await this.o.backend.listPhases()).filter((p) => p.rollout === run.spec.id).length;
    if (run.abort.signal.aborted) throw new Superseded();
    return decide(run.spec, ledger, this.o.node, this.o.clock.now(), fleet);
  }

  /** A canary watches its own health for the soak; unhealthy at any look fails the canary, and the rollout stops. */
  private async soak(run: Run): Promise<void> {
    const { node, clock } = this.o;
    await this.record(run, (l) => withCanary(l, node, 'soaking'));
    this.phase(run, 'soaking', { canary: true });
    const end = clock.now() + (run.spec.canary?.soakMs ?? 0);
    for (;;) {
      if (this.o.actions.health() === 'unhealthy') {
        await this.record(run, (l) => withCanary(l, node, 'failed'));
        this.phase(run, 'failed', { reason: 'canary-unhealthy', canary: true });
        throw new SpcdError('UPGRADE_FAILED', 'canary became unhealthy during its soak', { node });
      }
      const left = end - clock.now();
      if (left <= 0) break;
      await this.pause(run, Math.min(left, this.o.soakCheckMs ?? 5_000));
    }
    await this.record(run, (l) => withCanary(l, node, 'passed'));
    this.phase(run, 'done', { canary: true });
  }
}
