#!/usr/bin/env bash
# What `npm run demo` needs on a fresh Debian 12 machine with Node and npm, and
# nothing more: npm dependencies and a build, a running Docker engine
# (Debian's docker.io, when none answers) and the local demo images. The test
# command's extra tools are scripts/setup.sh's. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm run --silent build
bash scripts/ensure-docker.sh
bash scripts/build-demo-images.sh
