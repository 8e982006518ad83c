/**
 * bench:chaos — the long form of the chaos run (test/support/chaos/).
 * CHAOS_ITERATIONS (default 200), CHAOS_SEED (default: time), CHAOS_DOCKERD=1
 * also SIGKILLs and restarts the Docker engine during upgrades (only on a
 * machine where nothing else uses that engine).
 * The last line is the contract:
 *   chaos_iterations=N kills=K invariant_violations=V max_converge_s=X
 */
import { runChaos, summaryLine } from '../test/support/chaos/run.js';

const iterations = Number(process.env.CHAOS_ITERATIONS ?? 200);
const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
console.log(`chaos: seed ${seed}, ${iterations} iterations`);
const s = await runChaos({
  iterations,
  seed,
  dockerd: process.env.CHAOS_DOCKERD === '1',
  diskFull: true,
  convergeTimeoutMs: 120_000,
  log: (l) => console.log(l),
});
for (const v of s.violations) console.log(`VIOLATION: ${v}`);
console.log(`actions ${JSON.stringify(s.actions)} answers ${JSON.stringify(s.answers)} samples ${s.samples}`);
console.log(summaryLine(s));
process.exit(s.violations.length === 0 ? 0 : 1);
