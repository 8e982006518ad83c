#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --optimize-for-size
// spcd is a long-lived host agent with a memory budget
// (docs/decisions/0006-memory-budget.md): V8 trades some JIT speed for a
// smaller heap, and glibc keeps two malloc arenas instead of one per thread
// that ever allocated. Run this file itself (systemd, the DaemonSet, the
// tests, the demo and the benchmarks all do) so the line above applies.
import { main } from '../dist/main.js';
main(process.argv.slice(2)).then(
  (code) => {
    process.exit(typeof code === 'number' ? code : 0);
  },
  (err) => {
    process.stderr.write(`spcd: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
