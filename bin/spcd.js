#!/usr/bin/env -S node --optimize-for-size
// --optimize-for-size: spcd is a long-lived host agent; it trades some JIT
// speed for a smaller heap (docs/decisions/0006-memory-budget.md). Run this
// file itself (systemd, the DaemonSet, tests and benchmarks all do) so the
// flag above applies.
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
