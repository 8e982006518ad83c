/**
 * One node's RolloutRunner whose upgrade waits for the test: `finish()` ends
 * it. For the runner's phase-report tests (the fake clock, any backend).
 */
import { silentLogger } from '../../agent/log.js';
import type { RolloutBackend } from '../../agent/rollout/backend.js';
import { RolloutRunner, type RolloutRunnerOptions } from '../../agent/rollout/runner.js';
import type { FakeClock } from './fake-clock.js';

export interface OneNode {
  readonly runner: RolloutRunner;
  /** Ends the upgrade under way (it must have begun). */
  finish(): void;
  /** Upgrades completed so far. */
  applied(): number;
}

export function oneNodeRunner(
  backend: RolloutBackend,
  clock: FakeClock,
  opts: Partial<RolloutRunnerOptions> = {},
): OneNode {
  let finish: (() => void) | undefined;
  let applied = 0;
  const runner = new RolloutRunner({
    node: 'compute-0',
    backend,
    actions: {
      pending: () => applied === 0,
      prePull: async () => undefined,
      apply: () =>
        new Promise<void>((r) => {
          finish = () => {
            applied++;
            r();
          };
        }),
      health: () => 'healthy',
    },
    clock,
    log: silentLogger(),
    defaultMaxConcurrent: 1,
    random: () => 0.5,
    ...opts,
  });
  return {
    runner,
    finish: () => {
      if (!finish) throw new Error('no upgrade under way');
      finish();
    },
    applied: () => applied,
  };
}
