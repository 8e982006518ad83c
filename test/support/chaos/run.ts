import { cleanupInstance } from '../docker.js';
import { waitFor } from '../wait.js';
import { chooseAction, perform, type ActionContext } from './actions.js';
import { notConverged } from './converge.js';
import { DiskFiller } from './disk.js';
import { InvariantMonitor } from './monitor.js';
import { between, seededRandom } from './rng.js';
import { ChaosWorld } from './world.js';

export interface ChaosOptions {
  readonly iterations: number;
  readonly seed: number;
  /** SIGKILL and restart the Docker engine during upgrades (only where the run owns the engine). */
  readonly dockerd: boolean;
  /** Put the state directory on a small tmpfs and fill it now and then. */
  readonly diskFull: boolean;
  readonly convergeTimeoutMs: number;
  readonly log: (line: string) => void;
}

export interface ChaosSummary {
  readonly seed: number;
  readonly iterations: number;
  readonly kills: number;
  readonly violations: readonly string[];
  readonly maxConvergeMs: number;
  readonly actions: Readonly<Record<string, number>>;
  readonly answers: Readonly<Record<string, number>>;
  readonly samples: number;
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Drives a real spcd through random operator actions, container kills,
 * definition changes, a full state disk and SIGKILLs of spcd itself (some
 * during its own recovery), checking the invariants continuously and after
 * every convergence. The random delays pick *when* a fault lands; nothing
 * waits on a fixed sleep for an outcome: every wait is a condition with a
 * deadline.
 */
export async function runChaos(opts: ChaosOptions): Promise<ChaosSummary> {
  const rand = seededRandom(opts.seed);
  const world = new ChaosWorld();
  const disk = opts.diskFull ? DiskFiller.mount(world.sb.stateDir) : undefined;
  if (opts.diskFull && !disk) opts.log('chaos: cannot mount a tmpfs here; the disk-full action is off');
  const monitor = new InvariantMonitor(world.sb.instance, world.sb.stateDir);
  const violations: string[] = [];
  const actions: Record<string, number> = {};
  const answers = new Map<number, number>();
  const ctx: ActionContext = { world, rand, disk, dockerd: opts.dockerd, log: opts.log, answers };
  let kills = 0;
  let maxConvergeMs = 0;
  let done = 0;

  const restart = async (): Promise<void> => {
    world.start();
    await world.answering(90_000);
  };
  const converge = async (label: string): Promise<boolean> => {
    const t0 = Date.now();
    let last: string[] = [];
    try {
      await waitFor(
        `convergence after ${label}`,
        async () => {
          if (!world.alive()) {
            violations.push(`spcd exited after ${label}:\n${world.tail(20)}`);
            await restart();
          }
          last = await notConverged(world);
          // A container stopped by the operator stays stopped: start it again, as the operator would.
          for (const why of last) {
            const m = /^(.*): state stopped$/.exec(why);
            if (m)
              await world
                .api('POST', `/v1/containers/${encodeURIComponent(m[1]!)}/start`, {})
                .catch(() => undefined);
          }
          return last.length === 0;
        },
        { timeoutMs: opts.convergeTimeoutMs, intervalMs: 200 },
      );
    } catch {
      violations.push(
        `no convergence within ${opts.convergeTimeoutMs} ms after ${label}: ${last.join('; ')}`,
      );
      opts.log(world.tail(40));
      return false;
    }
    const took = Date.now() - t0;
    maxConvergeMs = Math.max(maxConvergeMs, took);
    return true;
  };

  try {
    world.writeDefinitions();
    await restart();
    if (!(await converge('first start'))) throw new Error(violations.join('\n'));
    monitor.start();
    for (let i = 0; i < opts.iterations; i++) {
      const action = chooseAction(ctx);
      actions[action] = (actions[action] ?? 0) + 1;
      const what = await perform(ctx, action);
      let note = '';
      if (rand() < 0.4) {
        await delay(between(rand, 0, 2500));
        await world.kill9();
        kills++;
        await restart();
        note = ' +SIGKILL';
        if (rand() < 0.3) {
          await delay(between(rand, 20, 1200));
          await world.kill9();
          kills++;
          await restart();
          note += ' +SIGKILL in recovery';
        }
      }
      const t0 = Date.now();
      const ok = await converge(`${i + 1}: ${what}${note}`);
      opts.log(`chaos ${i + 1}/${opts.iterations}: ${what}${note} -> converged in ${Date.now() - t0} ms`);
      done = i + 1;
      if (!ok) break;
    }
  } finally {
    await monitor.stop();
    await world.stop();
    // The run's own error (if any) is the one to see: a cleanup that fails too (the engine
    // may be what broke) is logged with the instance to remove by hand.
    await cleanupInstance(world.sb.instance).catch((err: Error) =>
      opts.log(`chaos: cleanup of instance ${world.sb.instance} failed: ${err.message}`),
    );
    disk?.unmount();
  }
  return {
    seed: opts.seed,
    iterations: done,
    kills,
    violations: [...violations, ...monitor.violations],
    maxConvergeMs,
    actions,
    answers: Object.fromEntries([...answers].map(([k, v]) => [String(k), v])),
    samples: monitor.sampleCount,
  };
}

export function summaryLine(s: ChaosSummary): string {
  return `chaos_iterations=${s.iterations} kills=${s.kills} invariant_violations=${s.violations.length} max_converge_s=${(s.maxConvergeMs / 1000).toFixed(1)}`;
}
