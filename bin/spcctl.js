#!/usr/bin/env node
import { runCli } from '../dist/cli/main.js';
runCli(process.argv.slice(2), process).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`spcctl: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
