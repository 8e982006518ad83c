#!/usr/bin/env bash
# dnsmasq (Debian's dnsmasq-base: the binary alone, no service that would start
# a resolver on the host) for the libvirt network test, which runs it as the
# DHCP server of a bridge the test creates, inside its own network namespace.
# Idempotent.
set -euo pipefail

if command -v dnsmasq >/dev/null 2>&1; then
  echo "ensure-dnsmasq: $(dnsmasq --version | head -n1)"
  exit 0
fi
echo "ensure-dnsmasq: installing Debian's dnsmasq-base package"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends dnsmasq-base >/dev/null 2>&1 ||
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends dnsmasq-base >/dev/null; }
echo "ensure-dnsmasq: $(dnsmasq --version | head -n1)"
