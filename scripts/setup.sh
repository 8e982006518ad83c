#!/usr/bin/env bash
# Everything spcd's tests need on a fresh Debian 12 machine with Node and npm:
# what the demo needs (scripts/setup-demo.sh: npm dependencies and a build, a
# running Docker engine, the local demo images), then promtool (Debian's
# prometheus package; its server is never started) for the metrics and
# alert-rule tests, zsh for the completion test, dnsmasq-base, etcd-server and
# iputils-ping for the network and fleet tests, tcpdump for the OpenStack
# e2e's count of the VMs' pings on the host. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-demo.sh
bash scripts/ensure-promtool.sh
bash scripts/ensure-zsh.sh
bash scripts/ensure-dnsmasq.sh
bash scripts/ensure-etcd.sh
bash scripts/ensure-ping.sh
bash scripts/ensure-tcpdump.sh
