#!/usr/bin/env bash
# promtool (Debian's `prometheus` package: ~19 MB download, ~96 MB installed)
# for the tests that check /metrics and the alert rules. Only promtool is
# used: the Prometheus server the package ships is never started. Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { promtool --version 2>&1 | head -n 1; }
ensure_package ensure-promtool promtool prometheus prometheus
