#!/usr/bin/env bash
# The README's second command: the whole suite (unit + integration on a real
# Docker engine), after the project's own setup, then the install test of the
# Debian package and the image (test/e2e/run-install-e2e.sh: about 2.5 min
# when the checkout's packages are already built, 3 to 5.5 min when it builds
# them, the longer while other tests load the machine; the package upgrade
# waits out a 15 s health gate). `.ci/run` calls this. With arguments
# (vitest filters), only vitest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npx tsc -p tsconfig.json --noEmit
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check . ; exit 1; }
npx vitest run "$@"
if [ "$#" -eq 0 ]; then
  bash test/e2e/run-install-e2e.sh
fi
