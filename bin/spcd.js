#!/usr/bin/env node
import { main } from '../dist/main.js';
main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`spcd: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
