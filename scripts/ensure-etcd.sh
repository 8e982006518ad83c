#!/usr/bin/env bash
# etcd (Debian's `etcd-server` package: ~8 MB download, ~24 MB installed) for
# the tests and the bench that run a real 3-member cluster on loopback ports
# (test/support/etcd-cluster.ts). Only the binary is used: the system etcd
# service the package ships is kept from starting (a policy-rc.d for the
# install), and stopped and disabled should a service manager start it anyway,
# so that it never holds port 2379. Idempotent.
set -euo pipefail

if command -v etcd >/dev/null 2>&1; then
  echo "ensure-etcd: $(etcd --version 2>&1 | head -n 1)"
  exit 0
fi

echo "ensure-etcd: installing Debian's etcd-server package (its service is not started)"
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
apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled --quiet etcd 2>/dev/null; then
  systemctl disable --now etcd >/dev/null 2>&1 || true
fi
echo "ensure-etcd: $(etcd --version 2>&1 | head -n 1)"
