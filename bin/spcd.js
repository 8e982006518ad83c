#!/usr/bin/env node
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
