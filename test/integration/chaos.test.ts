import { describe, expect, it } from 'vitest';
import { runChaos, summaryLine } from '../support/chaos/run.js';

/**
 * The short form of the chaos run (the long one is `npm run bench:chaos`):
 * a real spcd through random upgrades (good, crashing, unhealthy, hanging),
 * rollbacks, restarts, stops, container kills, definition edits and reloads,
 * bootstrap tasks, a full state disk, and SIGKILLs of spcd, some during its
 * recovery. Seeded: a failure prints the seed that replays it
 * (CHAOS_SEED=<n> npm run bench:chaos).
 */
const ITERATIONS = Number(process.env.CHAOS_ITERATIONS ?? 20);
const SEED = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);

describe('chaos (short form)', () => {
  it(
    `keeps every invariant through ${ITERATIONS} random iterations (seed ${SEED})`,
    async () => {
      const s = await runChaos({
        iterations: ITERATIONS,
        seed: SEED,
        dockerd: false,
        diskFull: true,
        convergeTimeoutMs: 90_000,
        log: (l) => console.log(l),
      });
      console.log(
        `actions ${JSON.stringify(s.actions)} answers ${JSON.stringify(s.answers)} samples ${s.samples}`,
      );
      console.log(summaryLine(s));
      expect(s.violations, `seed ${SEED}`).toEqual([]);
      expect(s.iterations).toBe(ITERATIONS);
      expect(s.samples).toBeGreaterThan(ITERATIONS);
    },
    ITERATIONS * 60_000,
  );
});
