#!/usr/bin/env bash
# zsh (Debian's package, ~4 MB installed) for the test that drives
# `spcctl completion zsh` through a real zsh. Idempotent.
set -euo pipefail

if command -v zsh >/dev/null 2>&1; then
  echo "ensure-zsh: $(zsh --version)"
  exit 0
fi
echo "ensure-zsh: installing Debian's zsh package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends zsh >/dev/null
echo "ensure-zsh: $(zsh --version)"
