#!/usr/bin/env bash
# Everything spcd's demo and tests need on a fresh Debian 12 machine with Node
# and npm: npm dependencies and a build, a running Docker engine (Debian's
# docker.io), the local demo images, and promtool (Debian's prometheus package;
# its server is never started) for the metrics and alert-rule tests, and zsh
# for the completion test. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm run --silent build
bash scripts/ensure-docker.sh
bash scripts/build-demo-images.sh
bash scripts/ensure-promtool.sh
bash scripts/ensure-zsh.sh
bash scripts/ensure-dnsmasq.sh
bash scripts/ensure-etcd.sh
bash scripts/ensure-ping.sh
