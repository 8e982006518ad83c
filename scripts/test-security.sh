#!/usr/bin/env bash
# The attacks on spcd's trust boundaries (test/security/, one test per
# attack, docs/explanation/security.md), after the project's own setup. Its last line is
# `attacks_refused=K/N`: K attacks refused of the N tried. `npm test` runs the
# same files with everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
status=0
npx vitest run --project security --passWithNoTests --reporter=default --reporter=json --outputFile="$report" "$@" || status=$?
node -e '
  const r = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  console.log(`attacks_refused=${r.numPassedTests}/${r.numTotalTests}`);
' "$report"
exit "$status"
