/**
 * The last start-up component: the preflight checks, then the reconciler
 * adopts, recovers and converges on the definitions in force, or keeps what
 * runs when they are not (docs/how-to/operate-a-host.md).
 */
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import { allContainers } from '../model/spec.js';
import type { ObservedContainer } from '../model/observed.js';
import type { DesiredContainer } from '../planner/types.js';
import type { Definitions } from '../config/definitions.js';
import { runPreflight } from '../preflight/run.js';
import type { EngineFacts, PreflightReport } from '../preflight/types.js';
import type { Reconciler } from '../reconciler/reconciler.js';
import type { Component } from './lifecycle.js';
import { describeStartupError } from './startup-error.js';

export interface ConvergeDeps {
  /** The engine's facts, for the preflight checks. */
  readonly engine: EngineFacts;
  /** The engine the operator named (--engine); preflight blocks when another answers. */
  readonly expectedEngine?: 'docker' | 'podman';
  readonly stateDir: string;
  /** The image policy's prefixes whose images must be signed (preflight checks the tools). */
  readonly signedPrefixes?: readonly string[];
  readonly clock: Clock;
  readonly log: Logger;
  readonly definitions: Definitions;
  readonly reconciler: Reconciler;
  /** The desired containers of the definitions in force (pins applied). */
  readonly computeDesired: () => Promise<DesiredContainer[]>;
  /** What to keep while the definitions are not in force. */
  readonly kept: (observed: readonly ObservedContainer[]) => DesiredContainer[];
}

export class Converge implements Component {
  readonly name = 'converge';
  private report: PreflightReport | undefined;

  constructor(private readonly d: ConvergeDeps) {}

  /** The preflight report, once it ran. */
  get preflight(): PreflightReport | undefined {
    return this.report;
  }

  async start(): Promise<void> {
    const { definitions, reconciler, log, clock } = this.d;
    const report = await runPreflight({
      engine: this.d.engine,
      ...(this.d.expectedEngine ? { expectedEngine: this.d.expectedEngine } : {}),
      stateDir: this.d.stateDir,
      now: () => clock.now(),
      hypervisorSet: allContainers(definitions.current.sets).some((c) => c.role === 'hypervisor'),
      signedPrefixes: this.d.signedPrefixes ?? [],
    });
    this.report = report;
    if (!report.ok) {
      log.error(
        { blocking: report.blocking },
        `preflight blocks new containers: ${report.blocking.join(', ')}`,
      );
      reconciler.blockCreates(report.blocking.join(', '));
    } else {
      log.info({ warnings: report.checks.filter((c) => !c.ok).map((c) => c.name) }, 'preflight passed');
    }
    let desired: DesiredContainer[] = [];
    if (!definitions.error) {
      try {
        desired = await this.d.computeDesired();
      } catch (err) {
        definitions.notInForce(err);
      }
    }
    const e = definitions.error;
    if (e) {
      process.stderr.write(`spcd: definitions not loaded, keeping what runs: ${describeStartupError(e)}\n`);
      log.error(
        { code: e.code, problems: e.details.problems, err: describeStartupError(e) },
        'definitions not loaded: keeping the running containers (restarting exits, changing nothing) until a reload reads them',
      );
      reconciler.keepRunning({ reason: e.message, derive: (observed) => this.d.kept(observed) });
    }
    await reconciler.start(desired, e ? undefined : () => this.d.computeDesired());
  }

  /** Makes a start waiting on the engine give up. */
  interrupt(): void {
    void this.d.reconciler.stop();
  }

  /**
   * From the first moment of shutdown: no new pass or operation, and the
   * reconciler's stop deadline runs from here (stop() below waits for it).
   */
  drain(): void {
    void this.d.reconciler.stop();
  }

  stop(): Promise<void> {
    return this.d.reconciler.stop();
  }
}
