#!/usr/bin/env bash
# iputils' ping (Debian's iputils-ping) for the namespace pinger of the network
# tests (test/e2e/ns-ping.ts): `-D` stamps every line with the epoch time and
# `-O` prints a line for a probe still unanswered when the next one goes out,
# which busybox's ping does not. Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { ping -V | head -n 1; }
ensure_package ensure-ping ping iputils-ping
