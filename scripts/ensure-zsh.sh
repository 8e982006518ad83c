#!/usr/bin/env bash
# zsh (Debian's package, ~4 MB installed) for the test that drives
# `spcctl completion zsh` through a real zsh. Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { zsh --version; }
ensure_package ensure-zsh zsh zsh
