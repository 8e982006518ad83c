#!/usr/bin/env bash
# etcd (Debian's `etcd-server` package: ~8 MB download, ~24 MB installed) for
# the tests and the bench that run a real 3-member cluster on loopback ports
# (test/support/etcd-cluster.ts). Only the binary is used: the system etcd
# service the package ships is never started, so it never holds port 2379.
# Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { etcd --version 2>&1 | head -n 1; }
ensure_package ensure-etcd etcd etcd-server etcd
