#!/usr/bin/env bash
# promtool (Debian's `prometheus` package: ~19 MB download, ~96 MB installed)
# for the tests that check /metrics and the alert rules. Only promtool is
# used: the Prometheus server the package ships is kept from starting (a
# policy-rc.d for the install) and is never run. Idempotent.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  echo "ensure-promtool: $(promtool --version 2>&1 | head -n 1)"
  exit 0
fi

echo "ensure-promtool: installing Debian's prometheus package for promtool (the server is not started)"
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
ours=""
if [ ! -e "$policy" ]; then
  # 101: "action not allowed": invoke-rc.d and deb-systemd-invoke start no service.
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  ours=1
fi
cleanup() { if [ -n "$ours" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# Should a service manager have started it anyway, stop and disable it: spcd needs promtool only.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "ensure-promtool: $(promtool --version 2>&1 | head -n 1)"
