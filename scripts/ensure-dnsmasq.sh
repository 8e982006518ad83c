#!/usr/bin/env bash
# dnsmasq (Debian's dnsmasq-base: the binary alone, no service that would start
# a resolver on the host) for the libvirt network test, which runs it as the
# DHCP server of a bridge the test creates, inside its own network namespace.
# Idempotent.
set -euo pipefail
# shellcheck source=lib/debian-package.sh
. "$(dirname "$0")/lib/debian-package.sh"
version() { dnsmasq --version | head -n 1; }
ensure_package ensure-dnsmasq dnsmasq dnsmasq-base
