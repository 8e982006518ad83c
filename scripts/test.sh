#!/usr/bin/env bash
# The README's second command: the whole suite (unit + integration on a real
# Docker engine), after the project's own setup. `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npx tsc -p tsconfig.json --noEmit
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check . ; exit 1; }
npx vitest run "$@"
