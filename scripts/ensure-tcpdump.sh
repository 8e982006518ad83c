#!/usr/bin/env bash
# Debian's tcpdump for the OpenStack e2e's capture of the VMs' pings on the
# host (test/e2e/tap-capture.ts): which packets the host carried from one
# VM's tap to the other's. Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { tcpdump --version 2>&1 | head -n 1; }
ensure_package ensure-tcpdump tcpdump tcpdump
